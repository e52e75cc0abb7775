# UperNet with a tiny InLine-DeiT (width 64, 4 global blocks), trained from scratch on the toy ADE20K
# data in a few CPU minutes, as mmseg's ViT UperNet: every block's stride-16 map through mmseg's
# MultiLevelNeck (rescaled 4x, 2x, 1x, 0.5x); evaluated with mIoU.
#   python tools/train.py configs/toy/upernet_inline-deit-mini_toy-ade.py
_base_ = [
    'mmseg::_base_/models/upernet_vit-b16_ln_mln.py',
    './_base_/toy-ade.py',
    './_base_/toy-runtime_mmseg.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-deit-mini.py',
]

norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=_base_.crop_size),
    pretrained=None,
    backbone=dict(_base_.inline_backbone, _delete_=True, out_indices=(0, 1, 2, 3), out_norm=False),
    neck=dict(in_channels=[64, 64, 64, 64], out_channels=64),
    decode_head=dict(in_channels=[64, 64, 64, 64], channels=64, num_classes=_base_.num_classes, norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=64, channels=32, num_classes=_base_.num_classes, norm_cfg=norm_cfg))
