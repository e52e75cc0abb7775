# ViTDet-style Mask R-CNN with a tiny InLine-DeiT (width 64, 4 global blocks), trained from scratch on
# the toy COCO data in a few CPU minutes: the last block's stride-16 map through ViTDet's simple
# pyramid (SimpleFPN, LN2d), layer-wise lr decay 0.9; boxes and masks evaluated with COCO AP.
#   python tools/demo_toy.py --config configs/toy/mask-rcnn_inline-deit-mini_simple-fpn_toy-coco.py
_base_ = [
    'mmdet::_base_/models/mask-rcnn_r50_fpn.py',
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-deit-mini.py',
]

num_classes = 3
norm_cfg = dict(type='LN2d', requires_grad=True)
model = dict(
    backbone=dict(_base_.inline_backbone, _delete_=True, out_indices=(-1,), with_cls_token=False, out_norm=False),
    neck=dict(_delete_=True, type='SimpleFPN', backbone_channel=_base_.inline_width, out_channels=64, num_outs=5,
              norm_cfg=norm_cfg),
    rpn_head=dict(in_channels=64, feat_channels=64, anchor_generator=dict(scales=[4])),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=64),
        bbox_head=dict(in_channels=64, fc_out_channels=256, num_classes=num_classes),
        mask_roi_extractor=dict(out_channels=64),
        mask_head=dict(num_convs=2, in_channels=64, conv_out_channels=64, num_classes=num_classes,
                       norm_cfg=norm_cfg)),
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=500, max_per_img=200),
        rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(
        rpn=dict(nms_pre=300, max_per_img=100),
        rcnn=dict(max_per_img=20)))
optim_wrapper = dict(constructor='LayerDecayOptimWrapperConstructor', paramwise_cfg=dict(_delete_=True, decay_rate=0.9))
