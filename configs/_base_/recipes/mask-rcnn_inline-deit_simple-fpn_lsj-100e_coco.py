# Mask R-CNN with ViTDet's simple feature pyramid, 100 epochs of large-scale jitter at 1024x1024 on
# COCO, with an InLine-DeiT backbone: mmdet's projects/ViTDet recipe with every block global InLine
# attention instead of 14x14 windows and four global blocks. Data, schedule, optimizer:
# vitdet_inline-deit_lsj-100e_coco-instance.py. Neck and heads as ViTDet: SimpleFPN (strides 4-64),
# a 2-conv RPN head, a 4-conv + 1-fc box head and the mask head, all with LN2d.
# A config under configs/vitdet/ adds the variant and its width.
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    './vitdet_inline-deit_lsj-100e_coco-instance.py',
]

model = dict(
    data_preprocessor=dict(pad_size_divisor=32, pad_mask=True,
                           batch_augments=[dict(type='BatchFixedSizePad', size=_base_.image_size, pad_mask=True)]),
    backbone=_base_.vitdet_backbone,
    neck=dict(_delete_=True, type='SimpleFPN', out_channels=256, num_outs=5, norm_cfg=_base_.norm_cfg),
    rpn_head=dict(num_convs=2),
    roi_head=dict(
        bbox_head=dict(type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=_base_.norm_cfg),
        mask_head=dict(norm_cfg=_base_.norm_cfg)))
