# Mask R-CNN + FPN, 1x schedule on COCO, with an InLine-Swin backbone: mmdet's
# Swin Mask R-CNN 1x recipe (AdamW lr 1e-4, weight decay 0.05, 1000-iteration
# warm-up, 8 GPUs x 2 images). A config under configs/mask_rcnn/ adds the variant
# (configs/_base_/backbones/inline-swin-*.py).
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    'mmdet::_base_/datasets/coco_instance.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    '../inline_runtime_mmdet.py',  # custom_imports, custom_hooks, atomic checkpoints
]

model = dict(
    backbone=dict(
        _delete_=True,
        type='InLineSwin',
        window_size=7,
        out_indices=(0, 1, 2, 3),
        out_norm=True,
        frozen_stages=-1,
        with_cp=False))

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[8, 11], gamma=0.1),
]

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(_delete_=True, type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=_base_.inline_paramwise_cfg)

# 8 GPUs x 2 images (the data base's batch_size=2); auto_scale_lr's base_batch_size is 16.
train_dataloader = dict(batch_size=2)
