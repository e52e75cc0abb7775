# Mask2Former panoptic segmentation with a tiny InLine-Swin (embed 32, one block per stage), trained from
# scratch on the toy COCO panoptic data on CPU: PQ / SQ / RQ with mmdet's CocoPanopticMetric (panopticapi),
# box and mask AP with its CocoMetric.
#   python tools/train.py configs/toy/mask2former_inline-swin-mini_toy-coco-panoptic.py
# mmdet's lsj panoptic recipe's model (things and stuff, panoptic and instance output), its head at toy
# width (_base_/mask2former-mini.py), 20 queries (an image holds 1-4 things and 2 stuff regions), the toy
# data's pipelines (128x128 images, flips) instead of large-scale jitter. mmdet's Mask2Former configs bring
# COCO and a runtime with the model, so the model is written out (as in mask2former_*_toy-coco.py).
_base_ = [
    './_base_/toy-coco_panoptic.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-swin-mini.py',
    './_base_/mask2former-mini.py',
]

num_things_classes = _base_.num_things_classes
num_stuff_classes = _base_.num_stuff_classes
num_classes = num_things_classes + num_stuff_classes
model = dict(
    type='Mask2Former',
    data_preprocessor=dict(type='DetDataPreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_size_divisor=32, pad_mask=True, mask_pad_value=0, pad_seg=True,
                           seg_pad_value=255),
    backbone=_base_.inline_backbone,
    panoptic_head=dict(
        _base_.m2f_head,
        in_channels=_base_.inline_channels,
        num_things_classes=num_things_classes,
        num_stuff_classes=num_stuff_classes,
        num_queries=20,
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=2.0, reduction='mean',
                      class_weight=[1.0] * num_classes + [_base_.m2f_no_object_weight])),
    panoptic_fusion_head=dict(type='MaskFormerFusionHead', num_things_classes=num_things_classes,
                              num_stuff_classes=num_stuff_classes, loss_panoptic=None, init_cfg=None),
    train_cfg=_base_.m2f_train_cfg,
    test_cfg=dict(panoptic_on=True, semantic_on=False, instance_on=True, max_per_image=20, iou_thr=0.8,
                  filter_low_score=True),
    init_cfg=None)

# fewer iterations than the other toys (_base_/toy-schedule.py): trained 200 iterations PQ was 78.9 (stuff
# 99.1, things 65.4), trained 400 it was 82.1 (docs/toy_runs.md)
max_iters = 200
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [_base_.param_scheduler[0], dict(_base_.param_scheduler[1], end=max_iters)]
default_hooks = dict(checkpoint=dict(interval=max_iters))
