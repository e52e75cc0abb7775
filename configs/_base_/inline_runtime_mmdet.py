# Runtime of every MMDetection config here (recipes and toy configs): mmdet's default
# runtime plus what InLine backbones need (inline_common.py: custom_imports, custom_hooks,
# the no-decay keys inline_paramwise_cfg) and atomic checkpoints.
_base_ = ['mmdet::_base_/default_runtime.py', './inline_common.py']

# checkpoints and last_checkpoint written atomically: a killed write never breaks --resume
# (mmdet's default_runtime.py owns default_hooks; interval etc. stay mmdet's)
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
