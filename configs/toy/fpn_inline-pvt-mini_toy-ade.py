# Semantic FPN with a tiny InLine-PVT (embed 32-256, one block per stage), trained from scratch on
# the toy ADE20K data in a few CPU minutes; evaluated with mIoU.
#   python tools/train.py configs/toy/fpn_inline-pvt-mini_toy-ade.py
_base_ = [
    'mmseg::_base_/models/fpn_r50.py',
    './_base_/toy-ade.py',
    '../_base_/inline_runtime_mmseg.py',  # custom_imports, custom_hooks
]
# the runtime base's imports, plus the module that registers the toy datasets
custom_imports = dict(_base_.custom_imports,
                      imports=_base_.custom_imports.imports + ['inline_dense.toy_data.datasets'])

num_classes = 5
norm_cfg = dict(type='BN', requires_grad=True)
crop_size = (128, 128)
model = dict(
    data_preprocessor=dict(size=crop_size),
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='InLinePVT',
        embed_dims=(32, 64, 128, 256),
        depths=(1, 1, 1, 1),
        num_heads=(1, 2, 4, 8),
        mlp_ratios=(4, 4, 4, 4),
        pretrain_img_size=128,
        drop_path_rate=0.0,
        out_indices=(0, 1, 2, 3),
        init_cfg=None),  # from scratch: no pretrained weights on the toy data
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=64),
    decode_head=dict(in_channels=[64, 64, 64, 64], channels=64, num_classes=num_classes, norm_cfg=norm_cfg))

max_iters = 400
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30, end=max_iters),
]
default_hooks = dict(  # mmseg keeps these in its schedule bases, which the toy configs do not use
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # written atomically (see configs/_base_/inline_runtime_mmseg.py)
    checkpoint=dict(type='AtomicCheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
