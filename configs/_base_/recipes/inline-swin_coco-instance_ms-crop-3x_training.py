# The 1x training (inline-swin_coco-instance_1x_training.py) made mmdet's Swin "ms-crop-3x": the DETR
# multi-scale + crop augmentation, 36 epochs with steps at 27 and 33.
_base_ = [
    './inline-swin_coco-instance_1x_training.py',
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
