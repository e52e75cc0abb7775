# Mask R-CNN at toy width for the toy COCO data (3 classes, 1-4 objects a 128x128 image): mmdet's
# model base with its neck output, RPN and RoI heads 64 channels wide, fewer proposals and RoI
# samples. A config adds the backbone and what feeds the neck.
_base_ = 'mmdet::_base_/models/mask-rcnn_r50_fpn.py'

num_classes = 3
model = dict(
    neck=dict(out_channels=64),
    rpn_head=dict(in_channels=64, feat_channels=64, anchor_generator=dict(scales=[4])),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=num_classes),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(num_convs=2, in_channels=64, conv_out_channels=64, num_classes=num_classes)),
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=500, max_per_img=200),
        rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(
        rpn=dict(nms_pre=300, max_per_img=100),
        rcnn=dict(max_per_img=20)))
