# ViTDet-style Mask R-CNN with a tiny InLine-DeiT (width 64, 4 global blocks), trained from scratch on
# the toy COCO data in a few CPU minutes: the last block's stride-16 map through ViTDet's simple
# pyramid (SimpleFPN, LN2d), layer-wise lr decay 0.9; boxes and masks evaluated with COCO AP.
#   python tools/demo_toy.py --config configs/toy/mask-rcnn_inline-deit-mini_simple-fpn_toy-coco.py
_base_ = [
    './_base_/mask-rcnn-mini.py',  # mmdet's Mask R-CNN, heads at toy width
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-deit-mini.py',
]

norm_cfg = dict(type='LN2d', requires_grad=True)
model = dict(
    backbone=dict(_base_.inline_backbone, _delete_=True, out_indices=(-1,), with_cls_token=False, out_norm=False),
    neck=dict(_delete_=True, type='SimpleFPN', backbone_channel=_base_.inline_width, out_channels=64, num_outs=5,
              norm_cfg=norm_cfg),
    roi_head=dict(mask_head=dict(norm_cfg=norm_cfg)))
optim_wrapper = dict(constructor='LayerDecayOptimWrapperConstructor', paramwise_cfg=dict(_delete_=True, decay_rate=0.9))
