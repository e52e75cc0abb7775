_base_ = [
    '../_base_/recipes/retinanet_inline-deit_simple-fpn_lsj-100e_coco.py',
    '../_base_/backbones/inline-deit-s.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_drop_path_rate),
    neck=dict(backbone_channel=_base_.inline_channels[-1]))
