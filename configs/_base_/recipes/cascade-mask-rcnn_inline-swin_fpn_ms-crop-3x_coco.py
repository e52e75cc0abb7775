# Cascade Mask R-CNN + FPN, 3x schedule with multi-scale training and random crops, with an
# InLine-Swin backbone: the cascade 1x recipe with the Swin ms-crop-3x training (the same
# pipeline and schedule as mask-rcnn_inline-swin_fpn_ms-crop-3x_coco.py).
_base_ = [
    './cascade-mask-rcnn_inline-swin_fpn_1x_coco.py',
    '../datasets/coco_ms-crop_train_pipeline.py',
]

train_pipeline = _base_.ms_crop_train_pipeline
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))

max_epochs = 36
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[27, 33], gamma=0.1),
]
