# Mask R-CNN + FPN, 1x schedule on COCO, with an InLine-PVT backbone: the PVT
# Mask R-CNN recipe (AdamW lr 2e-4, weight decay 1e-4, mmdet's 1x schedule with its
# 500-iteration warm-up, 8 GPUs x 2 images). A config under configs/mask_rcnn/ adds
# the variant (configs/_base_/backbones/inline-pvt-*.py).
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    '../inline_runtime_mmdet.py',  # custom_imports, custom_hooks, atomic checkpoints
]

model = dict(
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLinePVT'))

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(_delete_=True, type='AdamW', lr=0.0002, betas=(0.9, 0.999), weight_decay=0.0001),
    paramwise_cfg=_base_.inline_paramwise_cfg)

# 8 GPUs x 2 images; auto_scale_lr's base_batch_size is 16.
train_dataloader = dict(batch_size=2)
