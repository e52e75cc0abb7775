_base_ = [
    '../_base_/recipes/mask2former_inline_8xb2-lsj-50e_coco.py',
    '../_base_/backbones/inline-swin-t.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, drop_path_rate=0.3, window_size=7),
    panoptic_head=dict(in_channels=_base_.inline_channels))
