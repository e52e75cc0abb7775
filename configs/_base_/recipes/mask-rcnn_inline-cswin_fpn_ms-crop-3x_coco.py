# Mask R-CNN + FPN, 3x multi-scale + crop on COCO, with an InLine-CSwin backbone: the Swin
# ms-crop-3x recipe (CSWin publishes no detection configs) with the backbone swapped.
_base_ = './mask-rcnn_inline-swin_fpn_ms-crop-3x_coco.py'

# the base recipe's backbone settings (window size, drop path) do not apply to InLine-CSwin
model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineCSwin'))
