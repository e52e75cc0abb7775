# Cascade Mask R-CNN with a tiny InLine-CSwin (embed 32, one block per stage), trained from
# scratch on the toy COCO data in a few CPU minutes: boxes and masks evaluated with COCO AP.
#   python tools/train.py configs/toy/cascade-mask-rcnn_inline-cswin-mini_fpn_toy-coco.py
_base_ = [
    'mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py',
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
]

num_classes = 3
model = dict(
    backbone=dict(
        _delete_=True,
        type='InLineCSwin',
        embed_dims=32,
        depths=(1, 1, 1, 1),
        num_heads=(1, 2, 4, 8),
        split_size=(1, 2, 2, 2),  # stripes narrow enough for the 4x4 / 2x2 maps of 64-128 px images
        attn_type='IISS',
        drop_path_rate=0.0,
        out_indices=(0, 1, 2, 3),
        init_cfg=None),  # from scratch: no pretrained weights on the toy data
    neck=dict(in_channels=[32, 64, 128, 256], out_channels=64),
    rpn_head=dict(in_channels=64, feat_channels=64, anchor_generator=dict(scales=[4])),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        # mmdet's three cascade stages (their IoU thresholds and target stds), narrower
        bbox_head=[dict(head, in_channels=64, fc_out_channels=256, num_classes=num_classes)
                   for head in _base_.model.roi_head.bbox_head],
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(num_convs=2, in_channels=64, conv_out_channels=64, num_classes=num_classes)),
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=500, max_per_img=200),
        rcnn=[dict(stage, sampler=dict(stage.sampler, num=64)) for stage in _base_.model.train_cfg.rcnn]),
    test_cfg=dict(
        rpn=dict(nms_pre=300, max_per_img=100),
        rcnn=dict(max_per_img=20)))

# fewer iterations than the other toy configs (_base_/toy-schedule.py): three cascade stages cost more
max_iters = 300
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [_base_.param_scheduler[0], dict(_base_.param_scheduler[1], end=max_iters)]
default_hooks = dict(checkpoint=dict(interval=max_iters))
