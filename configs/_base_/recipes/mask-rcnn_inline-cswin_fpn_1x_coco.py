# Mask R-CNN + FPN, 1x schedule on COCO, with an InLine-CSwin backbone. CSWin publishes no
# detection configs, so this is the Swin Mask R-CNN 1x recipe (AdamW lr 1e-4, weight decay
# 0.05, 1000-iteration warm-up, 8 GPUs x 2 images) with the backbone swapped. A config
# under configs/mask_rcnn/ adds the variant (configs/_base_/backbones/inline-cswin-*.py).
_base_ = './mask-rcnn_inline-swin_fpn_1x_coco.py'

# the base recipe's backbone settings (window size, drop path) do not apply to InLine-CSwin
model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineCSwin'))
