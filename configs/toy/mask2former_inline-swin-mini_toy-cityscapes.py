# Mask2Former semantic segmentation with a tiny InLine-Swin (embed 32, one block per stage), trained from
# scratch on the toy Cityscapes data (64x128 crops) on CPU; evaluated with mIoU on whole 128x256 images.
#   python tools/train.py configs/toy/mask2former_inline-swin-mini_toy-cityscapes.py
# mmseg's 90k Cityscapes recipe's model (as its 160k ADE20K one), the head at toy width
# (_base_/mask2former-mini.py), 20 queries for the 19 classes (six occur). mmseg ships no model-only
# Mask2Former base, so the model is written out (as in mask2former_inline-swin-mini_toy-ade.py).
_base_ = [
    './_base_/toy-cityscapes.py',
    './_base_/toy-runtime_mmseg.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-swin-mini.py',
    './_base_/mask2former-mini.py',
]

# mmseg's Mask2Former head is mmdet's: the runtime's imports, plus mmdet's models
custom_imports = dict(_base_.custom_imports, imports=[*_base_.custom_imports.imports, 'mmdet.models'])

model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(type='SegDataPreProcessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_val=0, seg_pad_val=255, size=_base_.crop_size,
                           test_cfg=dict(size_divisor=32)),
    pretrained=None,
    backbone=_base_.inline_backbone,
    decode_head=dict(
        _base_.m2f_head,
        in_channels=_base_.inline_channels,
        num_classes=_base_.num_classes,
        num_queries=20,
        align_corners=False,
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=2.0, reduction='mean',
                      class_weight=[1.0] * _base_.num_classes + [_base_.m2f_no_object_weight]),
        train_cfg=_base_.m2f_train_cfg),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))  # the whole 2:1 image at once, as mmseg's Cityscapes configs test
optim_wrapper = dict(clip_grad=dict(max_norm=10.0, norm_type=2))  # as the MMDetection toys
