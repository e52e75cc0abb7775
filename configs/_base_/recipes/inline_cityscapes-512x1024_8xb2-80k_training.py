# What the UperNet recipes on Cityscapes share: mmseg's Cityscapes data (512x1024 crops, 19 classes,
# the test on the 2048x1024 image) and its 80k schedule (validation and checkpoints every 8000
# iterations), with the Swin UperNet optimiser of the ADE20K recipes
# (inline_ade20k-512x512_8xb2-160k_training.py: AdamW lr 6e-5, weight decay 0.01, none on norms,
# relative position tables and pos_embed, a 1500-iteration linear warm-up, then poly decay with power
# 1.0 to 0), 8 GPUs x 2 images. mmseg has no Swin UperNet for Cityscapes: its ResNet ones use SGD.
# A recipe adds mmseg's model base and the backbone.
_base_ = [
    'mmseg::_base_/datasets/cityscapes.py',
    'mmseg::_base_/schedules/schedule_80k.py',
    '../inline_runtime_mmseg.py',  # custom_imports, custom_hooks
]

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=_base_.inline_paramwise_cfg)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=80000, by_epoch=False),
]

# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader

# checkpoints and last_checkpoint written atomically: a killed write never breaks --resume
# (set here, after the schedule base that owns default_hooks; see inline_runtime_mmseg.py)
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
