_base_ = [
    '../_base_/recipes/cascade-mask-rcnn_inline-swin_fpn_ms-crop-3x_coco.py',
    '../_base_/backbones/inline-swin-t.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_drop_path_rate),
    neck=dict(in_channels=_base_.inline_channels))
