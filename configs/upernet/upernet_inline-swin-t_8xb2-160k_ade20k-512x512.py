_base_ = [
    '../_base_/recipes/upernet_inline-swin_8xb2-160k_ade20k-512x512.py',
    '../_base_/backbones/inline-swin-t.py',
]

model = dict(
    backbone=_base_.inline_backbone,
    decode_head=dict(in_channels=_base_.inline_channels),
    auxiliary_head=dict(in_channels=_base_.inline_channels[2]))
