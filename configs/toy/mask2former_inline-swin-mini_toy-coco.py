# Mask2Former instance segmentation with a tiny InLine-Swin (embed 32, one block per stage), trained
# from scratch on the toy COCO data on CPU: boxes and masks evaluated with COCO AP (pycocotools).
#   python tools/demo_toy.py --config configs/toy/mask2former_inline-swin-mini_toy-coco.py
# mmdet's lsj recipe's model (panoptic head with things only, instance output), its head at toy
# width (_base_/mask2former-mini.py), 20 queries (the toy images hold 1-4 objects), the toy data's
# pipelines (128x128 images, flips) instead of large-scale jitter. mmdet ships no model-only
# Mask2Former base (its configs bring COCO panoptic and a runtime), so the model is written out.
_base_ = [
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-swin-mini.py',
    './_base_/mask2former-mini.py',
]

num_classes = 3
model = dict(
    type='Mask2Former',
    data_preprocessor=dict(type='DetDataPreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_size_divisor=32, pad_mask=True, mask_pad_value=0, pad_seg=False),
    backbone=_base_.inline_backbone,
    panoptic_head=dict(
        _base_.m2f_head,
        in_channels=_base_.inline_channels,
        num_things_classes=num_classes,
        num_stuff_classes=0,
        num_queries=20,
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=2.0, reduction='mean',
                      class_weight=[1.0] * num_classes + [_base_.m2f_no_object_weight])),
    panoptic_fusion_head=dict(type='MaskFormerFusionHead', num_things_classes=num_classes, num_stuff_classes=0,
                              loss_panoptic=None, init_cfg=None),
    train_cfg=_base_.m2f_train_cfg,
    test_cfg=dict(panoptic_on=False, semantic_on=False, instance_on=True, max_per_image=20, iou_thr=0.8,
                  filter_low_score=True),
    init_cfg=None)

# a query-based head learns slowly: more iterations than the other toys (_base_/toy-schedule.py)
max_iters = 800
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [_base_.param_scheduler[0], dict(_base_.param_scheduler[1], end=max_iters)]
default_hooks = dict(checkpoint=dict(interval=max_iters))
