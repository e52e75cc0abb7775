# Cascade Mask R-CNN + FPN, 3x schedule with multi-scale training and random crops, with an
# InLine-Swin backbone: the cascade 1x recipe with the Swin ms-crop-3x training (the same pipeline
# and schedule as mask-rcnn_inline-swin_fpn_ms-crop-3x_coco.py).
_base_ = ['mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py',
          './inline-swin_coco-instance_ms-crop-3x_training.py']

model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7))
