# Cascade Mask R-CNN + FPN, 1x schedule on COCO, with an InLine-Swin backbone: mmdet's Cascade
# Mask R-CNN (mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py: three cascade stages with 2-fc box
# heads) trained with the Swin Mask R-CNN 1x recipe (inline-swin_coco-instance_1x_training.py). A
# config under configs/cascade_rcnn/ adds the variant (configs/_base_/backbones/inline-swin-*.py).
_base_ = ['mmdet::_base_/models/cascade-mask-rcnn_r50_fpn.py', './inline-swin_coco-instance_1x_training.py']

model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7))
