# UperNet with a tiny InLine-Swin (embed 32, one block per stage), trained from scratch on the toy
# Cityscapes data (64x128 crops) in a few CPU minutes; evaluated with mIoU on whole 128x256 images.
#   python tools/train.py configs/toy/upernet_inline-swin-mini_toy-cityscapes.py
_base_ = [
    'mmseg::_base_/models/upernet_swin.py',
    './_base_/toy-cityscapes.py',
    './_base_/toy-runtime_mmseg.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-swin-mini.py',
]

norm_cfg = dict(type='BN', requires_grad=True)
model = dict(
    data_preprocessor=dict(size=_base_.crop_size),
    backbone=dict(_base_.inline_backbone, _delete_=True),
    decode_head=dict(in_channels=_base_.inline_channels, channels=64, num_classes=_base_.num_classes,
                     norm_cfg=norm_cfg),
    auxiliary_head=dict(in_channels=_base_.inline_channels[2], channels=32, num_classes=_base_.num_classes,
                        norm_cfg=norm_cfg),
    test_cfg=dict(mode='whole'))  # the whole 2:1 image at once, as mmseg's Cityscapes configs test
