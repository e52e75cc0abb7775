# Runtime of the MMDetection toy configs: the runtime of every MMDetection config here, the
# toy datasets' registration, and a short from-scratch AdamW schedule with a cosine decay.
_base_ = ['../../_base_/inline_runtime_mmdet.py', './toy-schedule.py']

# the runtime base's imports, plus the module that registers the toy datasets
custom_imports = dict(_base_.custom_imports,
                      imports=[*_base_.custom_imports.imports, 'inline_dense.openmmlab.toy_datasets'])

optim_wrapper = dict(optimizer=dict(weight_decay=0.05), clip_grad=dict(max_norm=10.0, norm_type=2))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=30, end=_base_.max_iters),
]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50),
    checkpoint=dict(by_epoch=False, interval=_base_.max_iters, max_keep_ckpts=2))  # AtomicCheckpointHook
log_processor = dict(by_epoch=False)
auto_scale_lr = dict(enable=False, base_batch_size=4)
