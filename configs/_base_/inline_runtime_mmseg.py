# Runtime of every MMSegmentation config here (recipes and toy configs): mmseg's default
# runtime plus what InLine backbones need (inline_common.py: custom_imports, custom_hooks,
# the no-decay keys inline_paramwise_cfg).
#
# Atomic checkpoints: in MMSegmentation, default_hooks (and with it the checkpoint hook)
# belongs to the schedule bases (mmseg::_base_/schedules/schedule_*.py), and mmengine
# refuses a key defined by two bases of one file. This base therefore cannot set it; every
# mmseg config sets it right after its schedule:
#   default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
_base_ = ['mmseg::_base_/default_runtime.py', './inline_common.py']
