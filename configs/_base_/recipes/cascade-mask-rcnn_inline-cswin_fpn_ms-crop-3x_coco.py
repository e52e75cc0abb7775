# Cascade Mask R-CNN + FPN, 3x multi-scale + crop on COCO, with an InLine-CSwin backbone:
# the Swin cascade ms-crop-3x recipe (CSWin publishes no detection configs) with the
# backbone swapped. A config under configs/cascade_rcnn/ adds the variant.
_base_ = './cascade-mask-rcnn_inline-swin_fpn_ms-crop-3x_coco.py'

model = dict(
    backbone=dict(
        _delete_=True,  # the Swin recipe's backbone settings do not apply
        type='InLineCSwin',
        out_indices=(0, 1, 2, 3),
        out_norm=True,
        frozen_stages=-1,
        with_cp=False))
