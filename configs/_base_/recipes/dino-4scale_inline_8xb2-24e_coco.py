# DINO-4scale, 24 epochs (step at epoch 20): mmdet's dino-4scale_r50_8xb2-24e_coco.py schedule.
_base_ = ['./dino-4scale_inline_8xb2-12e_coco.py']
max_epochs = 24
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=1)
param_scheduler = [dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[20], gamma=0.1)]
