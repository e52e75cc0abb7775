# Mask R-CNN with a tiny InLine-Swin (embed 32, one block per stage), trained from scratch on
# the toy COCO data in a few CPU minutes: boxes and masks evaluated with COCO AP (pycocotools).
#   python tools/train.py configs/toy/mask-rcnn_inline-swin-mini_fpn_toy-coco.py
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-swin-mini.py',
]

num_classes = 3
model = dict(
    backbone=dict(_base_.inline_backbone, _delete_=True),
    neck=dict(in_channels=_base_.inline_channels, out_channels=64),
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
