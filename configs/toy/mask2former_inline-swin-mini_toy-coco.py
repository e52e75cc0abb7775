# Mask2Former instance segmentation with a tiny InLine-Swin (embed 32, one block per stage), trained
# from scratch on the toy COCO data on CPU: boxes and masks evaluated with COCO AP (pycocotools).
#   python tools/demo_toy.py --config configs/toy/mask2former_inline-swin-mini_toy-coco.py
# mmdet's lsj recipe's model (panoptic head with things only, instance output), its head at toy
# width (_base_/mask2former_inline-swin-mini_mmdet.py), 20 queries (the toy images hold 1-4 objects),
# the toy data's pipelines (128x128 images, flips) instead of large-scale jitter.
_base_ = ['./_base_/toy-coco_instance.py', './_base_/mask2former_inline-swin-mini_mmdet.py']

num_classes = 3
model = dict(
    data_preprocessor=dict(pad_seg=False),
    panoptic_head=dict(num_things_classes=num_classes, num_stuff_classes=0,
                       loss_cls=dict(class_weight=[1.0] * num_classes + [_base_.m2f_no_object_weight])),
    panoptic_fusion_head=dict(num_things_classes=num_classes, num_stuff_classes=0),
    test_cfg=dict(panoptic_on=False))

# a query-based head learns slowly: more iterations than the other toys (_base_/toy-schedule.py)
max_iters = 800
train_cfg = dict(max_iters=max_iters, val_interval=max_iters)
param_scheduler = [_base_.param_scheduler[0], dict(_base_.param_scheduler[1], end=max_iters)]
default_hooks = dict(checkpoint=dict(interval=max_iters))
