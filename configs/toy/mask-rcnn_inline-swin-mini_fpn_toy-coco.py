# Mask R-CNN with a tiny InLine-Swin (embed 32, one block per stage), trained from scratch on
# the toy COCO data in a few CPU minutes: boxes and masks evaluated with COCO AP (pycocotools).
#   python tools/train.py configs/toy/mask-rcnn_inline-swin-mini_fpn_toy-coco.py
_base_ = [
    './_base_/mask-rcnn-mini.py',  # mmdet's Mask R-CNN, heads at toy width
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-swin-mini.py',
]

model = dict(
    backbone=dict(_base_.inline_backbone, _delete_=True),
    neck=dict(in_channels=_base_.inline_channels))
