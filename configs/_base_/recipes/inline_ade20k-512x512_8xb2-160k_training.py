# What the UperNet recipes on ADE20K 512x512 share (mmseg's Swin and ViT / DeiT UperNet 160k
# recipes): the data, AdamW lr 6e-5 with weight decay 0.01 (none on norms, relative position
# tables and pos_embed), a 1500-iteration linear warm-up, then poly decay with power 1.0 to 0 over
# 160k iterations, 8 GPUs x 2 images. A recipe adds mmseg's model base and the backbone.
_base_ = [
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/schedules/schedule_160k.py',
    '../inline_runtime_mmseg.py',  # custom_imports, custom_hooks
]

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=_base_.inline_paramwise_cfg)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False),
]

# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader

# checkpoints and last_checkpoint written atomically: a killed write never breaks --resume
# (set here, after the schedule base that owns default_hooks; see inline_runtime_mmseg.py)
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
