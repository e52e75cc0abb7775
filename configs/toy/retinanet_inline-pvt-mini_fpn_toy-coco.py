# RetinaNet with a tiny InLine-PVT (embed 32-256, one block per stage), trained from scratch on
# the toy COCO data in a few CPU minutes; boxes evaluated with COCO AP (pycocotools).
#   python tools/train.py configs/toy/retinanet_inline-pvt-mini_fpn_toy-coco.py
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-pvt-mini.py',
]

# RetinaNet's FPN skips the stride-4 map: stage 0 is not returned at all (out_indices=(1, 2, 3),
# start_level=0), as in configs/retinanet/, so no output norm goes unused (DDP refuses those).
model = dict(
    backbone=dict(_base_.inline_backbone, _delete_=True, out_indices=(1, 2, 3)),
    neck=dict(in_channels=_base_.inline_channels[1:], out_channels=64, start_level=0, num_outs=5),
    bbox_head=dict(num_classes=3, in_channels=64, feat_channels=64, stacked_convs=2,
                   anchor_generator=dict(octave_base_scale=2)),
    test_cfg=dict(nms_pre=300, max_per_img=20))

# boxes only: the toy data's masks are not used
image_scale = (128, 128)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_scale, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(metric='bbox')
test_evaluator = val_evaluator
