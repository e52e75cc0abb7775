_base_ = [
    '../_base_/recipes/fpn_inline-pvt_4xb4-80k_ade20k-512x512.py',
    '../_base_/backbones/inline-pvt-m.py',
]

model = dict(
    backbone=_base_.inline_backbone,
    neck=dict(in_channels=_base_.inline_channels))
