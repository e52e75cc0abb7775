_base_ = [
    '../_base_/recipes/fpn_inline-cswin_4xb4-80k_ade20k-512x512.py',
    '../_base_/backbones/inline-cswin-t.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_seg_drop_path_rate),
    neck=dict(in_channels=_base_.inline_channels))
