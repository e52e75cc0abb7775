_base_ = [
    '../_base_/recipes/mask2former_inline_8xb2-160k_ade20k-512x512.py',
    '../_base_/backbones/inline-cswin-b.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_seg_drop_path_rate),
    decode_head=dict(in_channels=_base_.inline_channels))
