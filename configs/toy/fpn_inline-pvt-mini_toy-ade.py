# Semantic FPN with a tiny InLine-PVT (embed 32-256, one block per stage), trained from scratch on
# the toy ADE20K data in a few CPU minutes; evaluated with mIoU.
#   python tools/train.py configs/toy/fpn_inline-pvt-mini_toy-ade.py
_base_ = [
    'mmseg::_base_/models/fpn_r50.py',
    './_base_/toy-ade.py',
    './_base_/toy-runtime_mmseg.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-pvt-mini.py',
]

norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=_base_.crop_size),
    pretrained=None,
    backbone=dict(_base_.inline_backbone, _delete_=True),
    neck=dict(in_channels=_base_.inline_channels, out_channels=64),
    decode_head=dict(in_channels=[64, 64, 64, 64], channels=64, num_classes=_base_.num_classes, norm_cfg=norm_cfg))
