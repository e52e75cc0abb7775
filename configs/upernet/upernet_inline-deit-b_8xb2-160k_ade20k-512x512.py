_base_ = [
    '../_base_/recipes/upernet_inline-deit_8xb2-160k_ade20k-512x512.py',
    '../_base_/backbones/inline-deit-b.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_drop_path_rate),
    neck=dict(in_channels=_base_.inline_channels[:4], out_channels=_base_.inline_channels[-1]),
    decode_head=dict(in_channels=_base_.inline_channels[:4]),
    auxiliary_head=dict(in_channels=_base_.inline_channels[-1]))
