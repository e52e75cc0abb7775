# What the MMSegmentation Mask2Former toy configs share: the toy runtime (with mmdet's models, where
# mmseg's Mask2Former head lives) and the model, mmseg's Mask2Former recipes' (160k ADE20K, 90k
# Cityscapes) with the tiny InLine-Swin and the head at toy width (mask2former-mini.py). mmseg ships no
# model-only Mask2Former base (its configs bring the data and a runtime), so the model is written out.
# A config adds the data, the crop size, the classes, the queries and the class loss's class weights.
_base_ = [
    './toy-runtime_mmseg.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './inline-swin-mini.py',
    './mask2former-mini.py',
]

# mmseg's Mask2Former head is mmdet's: the runtime's imports, plus mmdet's models
custom_imports = dict(_base_.custom_imports, imports=[*_base_.custom_imports.imports, 'mmdet.models'])

model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(type='SegDataPreProcessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_val=0, seg_pad_val=255, test_cfg=dict(size_divisor=32)),
    pretrained=None,
    backbone=_base_.inline_backbone,
    decode_head=dict(
        _base_.m2f_head,
        in_channels=_base_.inline_channels,
        align_corners=False,
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=2.0, reduction='mean'),
        train_cfg=_base_.m2f_train_cfg),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
optim_wrapper = dict(clip_grad=dict(max_norm=10.0, norm_type=2))  # as the MMDetection toys
