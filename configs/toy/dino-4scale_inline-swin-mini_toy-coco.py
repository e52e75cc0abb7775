# DINO-4scale with a tiny InLine-Swin (embed 32, one block per stage), trained from scratch on the
# toy COCO data on CPU: boxes evaluated with COCO AP (pycocotools).
#   python tools/demo_toy.py --config configs/toy/dino-4scale_inline-swin-mini_toy-coco.py
# mmdet's DINO (two-stage, box refinement, contrastive denoising, focal loss + L1 + GIoU, Hungarian
# matching), cut for 128x128 images: 2 encoder / 3 decoder layers, feed-forward width 512, 30 queries
# and 20 denoising queries (the toy images hold 1-4 objects), at a higher learning rate. The width
# stays 256: mmdet's DINO decoder encodes reference points with 128 features a coordinate, fixed.
# mmdet ships no model-only DINO base (its DINO config brings COCO and a runtime, which the toy
# bases replace), so the model is written out here.
_base_ = [
    './_base_/toy-coco_instance.py',
    './_base_/toy-runtime_mmdet.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
    './_base_/inline-swin-mini.py',
]

num_classes = 3
embed_dims = 256
num_levels = 4
model = dict(
    type='DINO',
    num_queries=30,
    with_box_refine=True,
    as_two_stage=True,
    data_preprocessor=dict(type='DetDataPreprocessor', mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375],
                           bgr_to_rgb=True, pad_size_divisor=1),
    # four levels one stride coarser than the recipe's 8-64: stages 2-3 (strides 16, 32), the mapper
    # adds 64 and 128. At 128x128 a stride-8 level would hold 256 of the encoder's 340 tokens (3/4
    # of its cost); the toy objects (20-60 px) need no finer map than 16.
    backbone=dict(_base_.inline_backbone, out_indices=(2, 3)),
    neck=dict(type='ChannelMapper', in_channels=_base_.inline_channels[2:], kernel_size=1, out_channels=embed_dims,
              act_cfg=None, norm_cfg=dict(type='GN', num_groups=32), num_outs=num_levels),
    encoder=dict(
        num_layers=2,
        layer_cfg=dict(self_attn_cfg=dict(embed_dims=embed_dims, num_levels=num_levels, dropout=0.0),
                       ffn_cfg=dict(embed_dims=embed_dims, feedforward_channels=512, ffn_drop=0.0))),
    decoder=dict(
        num_layers=3,
        return_intermediate=True,
        layer_cfg=dict(self_attn_cfg=dict(embed_dims=embed_dims, num_heads=8, dropout=0.0),
                       cross_attn_cfg=dict(embed_dims=embed_dims, num_levels=num_levels, dropout=0.0),
                       ffn_cfg=dict(embed_dims=embed_dims, feedforward_channels=512, ffn_drop=0.0)),
        post_norm_cfg=None),
    positional_encoding=dict(num_feats=embed_dims // 2, normalize=True, offset=0.0, temperature=20),
    bbox_head=dict(
        type='DINOHead',
        num_classes=num_classes,
        embed_dims=embed_dims,
        sync_cls_avg_factor=True,
        loss_cls=dict(type='FocalLoss', use_sigmoid=True, gamma=2.0, alpha=0.25, loss_weight=1.0),
        loss_bbox=dict(type='L1Loss', loss_weight=5.0),
        loss_iou=dict(type='GIoULoss', loss_weight=2.0)),
    dn_cfg=dict(label_noise_scale=0.5, box_noise_scale=1.0,
                group_cfg=dict(dynamic=True, num_groups=None, num_dn_queries=20)),
    train_cfg=dict(assigner=dict(type='HungarianAssigner', match_costs=[
        dict(type='FocalLossCost', weight=2.0),
        dict(type='BBoxL1Cost', weight=5.0, box_format='xywh'),
        dict(type='IoUCost', iou_mode='giou', weight=2.0)])),
    test_cfg=dict(max_per_img=30))

# boxes only: the toy data's masks are loaded (the instance base's pipelines) but not evaluated
val_evaluator = dict(metric='bbox')
test_evaluator = val_evaluator

# the toy schedule (_base_/toy-schedule.py: 400 iterations, cosine decay) with DINO's gradient
# clipping and weight decay, AdamW at 4x mmdet's lr (no pretrained backbone to protect)
optim_wrapper = dict(optimizer=dict(lr=4e-4, weight_decay=1e-4), clip_grad=dict(max_norm=0.1, norm_type=2))
