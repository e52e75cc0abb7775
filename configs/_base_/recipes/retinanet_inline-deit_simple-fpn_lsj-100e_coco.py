# RetinaNet with ViTDet's simple feature pyramid, with an InLine-DeiT backbone, on ViTDet's data,
# schedule and optimizer (vitdet_inline-deit_lsj-100e_coco-instance.py; the masks it loads go unused,
# box AP only). The simple pyramid's five levels are at strides 4-64 (mmdet's RetinaNet FPN: 8-128),
# so octave_base_scale 8 on strides 4-64 keeps the anchors' sizes (32-512 px at the base octave).
# A config under configs/vitdet/ adds the variant and its width.
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    './vitdet_inline-deit_lsj-100e_coco-instance.py',
]

model = dict(
    data_preprocessor=dict(pad_size_divisor=32,
                           batch_augments=[dict(type='BatchFixedSizePad', size=_base_.image_size)]),
    backbone=_base_.vitdet_backbone,
    neck=dict(_delete_=True, type='SimpleFPN', out_channels=256, num_outs=5, norm_cfg=_base_.norm_cfg),
    bbox_head=dict(anchor_generator=dict(octave_base_scale=8, strides=[4, 8, 16, 32, 64])))

val_evaluator = dict(metric='bbox')
test_evaluator = val_evaluator
