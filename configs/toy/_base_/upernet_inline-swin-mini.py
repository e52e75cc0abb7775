# UperNet with the tiny InLine-Swin (_base_/inline-swin-mini.py) for the toy semantic data: mmseg's
# Swin UperNet model, its decode / auxiliary heads 64 / 32 channels wide with BatchNorm (one CPU
# process: no SyncBN). A config adds the data's crop size and classes.
_base_ = ['mmseg::_base_/models/upernet_swin.py', './inline-swin-mini.py']

norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    backbone=dict(_base_.inline_backbone, _delete_=True),
    decode_head=dict(in_channels=_base_.inline_channels, channels=64, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=_base_.inline_channels[2], channels=32, norm_cfg=norm_cfg))
