# Mask R-CNN + FPN, 1x schedule on COCO, with an InLine-CSwin backbone. CSWin publishes no
# detection configs, so this is the Swin Mask R-CNN 1x recipe (AdamW lr 1e-4, weight decay
# 0.05, 1000-iteration warm-up, 8 GPUs x 2 images) with the backbone swapped. A config
# under configs/mask_rcnn/ adds the variant (configs/_base_/backbones/inline-cswin-*.py).
_base_ = './mask-rcnn_inline-swin_fpn_1x_coco.py'

model = dict(
    backbone=dict(
        _delete_=True,  # the Swin recipe's backbone settings do not apply
        type='InLineCSwin',
        out_indices=(0, 1, 2, 3),
        out_norm=True,
        frozen_stages=-1,
        with_cp=False))
