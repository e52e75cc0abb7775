# Mask2Former panoptic segmentation with a tiny InLine-Swin (embed 32, one block per stage), trained from
# scratch on the toy COCO panoptic data on CPU: PQ / SQ / RQ with mmdet's CocoPanopticMetric (panopticapi),
# box and mask AP with its CocoMetric.
#   python tools/train.py configs/toy/mask2former_inline-swin-mini_toy-coco-panoptic.py
# mmdet's lsj panoptic recipe's model (things and stuff, panoptic and instance output), its head at toy
# width (_base_/mask2former_inline-swin-mini_mmdet.py), 20 queries (an image holds 1-4 things and 2 stuff
# regions), the toy data's pipelines (128x128 images, flips) instead of large-scale jitter.
_base_ = ['./_base_/toy-coco_panoptic.py', './_base_/mask2former_inline-swin-mini_mmdet.py']

num_things_classes = _base_.num_things_classes
num_stuff_classes = _base_.num_stuff_classes
num_classes = num_things_classes + num_stuff_classes
model = dict(
    data_preprocessor=dict(pad_seg=True, seg_pad_value=255),
    panoptic_head=dict(num_things_classes=num_things_classes, num_stuff_classes=num_stuff_classes,
                       loss_cls=dict(class_weight=[1.0] * num_classes + [_base_.m2f_no_object_weight])),
    panoptic_fusion_head=dict(num_things_classes=num_things_classes, num_stuff_classes=num_stuff_classes),
    test_cfg=dict(panoptic_on=True))

# fewer iterations than the other toys (_base_/toy-schedule.py): trained 200 iterations PQ was 78.9 (stuff
# 99.1, things 65.4), trained 400 it was 82.1 (docs/toy_runs.md)
max_iters = 200
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [_base_.param_scheduler[0], dict(_base_.param_scheduler[1], end=max_iters)]
default_hooks = dict(checkpoint=dict(interval=max_iters))
