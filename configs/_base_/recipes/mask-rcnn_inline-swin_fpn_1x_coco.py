# Mask R-CNN + FPN, 1x schedule on COCO, with an InLine-Swin backbone: mmdet's
# Swin Mask R-CNN 1x recipe (AdamW lr 1e-4, weight decay 0.05, 1000-iteration
# warm-up, 8 GPUs x 2 images). A config under configs/mask_rcnn/ adds the variant
# (configs/_base_/backbones/inline-swin-*.py).
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    '../schedules/inline-swin_adamw_1x.py',  # AdamW, 1000-iteration warm-up
    '../inline_runtime_mmdet.py',  # custom_imports, custom_hooks, atomic checkpoints
]

model = dict(
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7))

optim_wrapper = dict(paramwise_cfg=_base_.inline_paramwise_cfg)

# 8 GPUs x 2 images (the data base's batch_size=2); auto_scale_lr's base_batch_size is 16.
train_dataloader = dict(batch_size=2)
