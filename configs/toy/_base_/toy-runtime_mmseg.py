# Runtime of the MMSegmentation toy configs: the runtime of every MMSegmentation config here,
# the toy datasets' registration, and a short from-scratch AdamW schedule with a linear decay.
_base_ = ['../../_base_/inline_runtime_mmseg.py', './toy-schedule.py']

# the runtime base's imports, plus the module that registers the toy datasets
custom_imports = dict(_base_.custom_imports,
                      imports=[*_base_.custom_imports.imports, 'inline_dense.openmmlab.toy_datasets'])

optim_wrapper = dict(optimizer=dict(weight_decay=0.01))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='PolyLR', power=1.0, eta_min=0.0, by_epoch=False, begin=30, end=_base_.max_iters),
]
default_hooks = dict(  # mmseg keeps these in its schedule bases, which the toy configs do not use
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # written atomically (see configs/_base_/inline_runtime_mmseg.py)
    checkpoint=dict(type='AtomicCheckpointHook', by_epoch=False, interval=_base_.max_iters, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
