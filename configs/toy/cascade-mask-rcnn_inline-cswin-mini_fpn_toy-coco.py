# Cascade Mask R-CNN with a tiny InLine-CSwin (embed 32, one block per stage), trained from
# scratch on the toy COCO data in a few CPU minutes: boxes and masks evaluated with COCO AP.
#   python tools/train.py configs/toy/cascade-mask-rcnn_inline-cswin-mini_fpn_toy-coco.py
_base_ = [
    'mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py',
    './_base_/toy-coco_instance.py',
    '../_base_/inline_runtime_mmdet.py',  # custom_imports, custom_hooks, atomic checkpoints
]
# the runtime base's imports, plus the module that registers the toy datasets
custom_imports = dict(_base_.custom_imports,
                      imports=_base_.custom_imports.imports + ['inline_dense.toy_data.datasets'])

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

max_iters = 300
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=0.05),
    paramwise_cfg=dict(norm_decay_mult=0.0, bias_decay_mult=0.0),
    clip_grad=dict(max_norm=10.0, norm_type=2))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=30),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=False, begin=30, end=max_iters),
]
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50),
    checkpoint=dict(by_epoch=False, interval=max_iters, max_keep_ckpts=2))  # AtomicCheckpointHook
log_processor = dict(by_epoch=False)
auto_scale_lr = dict(enable=False, base_batch_size=4)
