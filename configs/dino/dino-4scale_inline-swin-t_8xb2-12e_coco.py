_base_ = [
    '../_base_/recipes/dino-4scale_inline_8xb2-12e_coco.py',
    '../_base_/backbones/inline-swin-t.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_drop_path_rate, window_size=7),
    neck=dict(in_channels=_base_.inline_channels[1:]))
