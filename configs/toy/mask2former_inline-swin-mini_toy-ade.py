# Mask2Former semantic segmentation with a tiny InLine-Swin (embed 32, one block per stage), trained
# from scratch on the toy ADE20K data on CPU; evaluated with mIoU.
#   python tools/train.py configs/toy/mask2former_inline-swin-mini_toy-ade.py
# mmseg's 160k ADE20K recipe's model, its head at toy width (_base_/mask2former-mini.py), one query
# a class and a few spare (10 for 5 classes). mmseg ships no model-only Mask2Former base (its configs
# bring ADE20K and a runtime), so the model is written out.
_base_ = [
    './_base_/toy-ade.py',
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
        num_queries=10,
        align_corners=False,
        loss_cls=dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, loss_weight=2.0, reduction='mean',
                      class_weight=[1.0] * _base_.num_classes + [_base_.m2f_no_object_weight]),
        train_cfg=_base_.m2f_train_cfg),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

# fewer iterations than the other toys (_base_/toy-schedule.py): large regions of five classes, which
# Mask2Former's queries segment within 200 iterations (mIoU 99.4 at 200 of an 800-iteration run)
max_iters = 300
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [_base_.param_scheduler[0], dict(_base_.param_scheduler[1], end=max_iters)]
default_hooks = dict(checkpoint=dict(interval=max_iters))
optim_wrapper = dict(clip_grad=dict(max_norm=10.0, norm_type=2))  # as the MMDetection toys
