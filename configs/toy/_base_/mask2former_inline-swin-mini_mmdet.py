# What the MMDetection Mask2Former toy configs share: the toy runtime and the model, mmdet's lsj
# recipes' (panoptic head, MaskFormer fusion head) with the tiny InLine-Swin and the head at toy width
# (mask2former-mini.py), 20 queries (a toy image holds 1-4 things and at most 2 stuff regions). mmdet
# ships no model-only Mask2Former base (its configs bring COCO panoptic and a runtime), so the model is
# written out. A config adds the data, the thing and stuff classes (in the heads and the class loss's
# class weights), whether the preprocessor pads the semantic map, and whether the test gives panoptic output.
_base_ = [
    './toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './inline-swin-mini.py',
    './mask2former-mini.py',
]

model = dict(
    type='Mask2Former',
    data_preprocessor=dict(type='DetDataPreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_size_divisor=32, pad_mask=True, mask_pad_value=0),
    backbone=_base_.inline_backbone,
    panoptic_head=dict(
        _base_.m2f_head,
        in_channels=_base_.inline_channels,
        num_queries=20,
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=2.0, reduction='mean')),
    panoptic_fusion_head=dict(type='MaskFormerFusionHead', loss_panoptic=None, init_cfg=None),
    train_cfg=_base_.m2f_train_cfg,
    test_cfg=dict(semantic_on=False, instance_on=True, max_per_image=20, iou_thr=0.8, filter_low_score=True),
    init_cfg=None)
