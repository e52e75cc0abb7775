# Mask R-CNN + FPN, 3x schedule with multi-scale training and random crops (the DETR augmentation
# of mmdet's Swin "ms-crop-3x" recipe), with an InLine-Swin backbone.
_base_ = ['mmdet::_base_/models/mask-rcnn_r50_fpn.py', './inline-swin_coco-instance_ms-crop-3x_training.py']

model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7))
