# The data, schedule and optimizer of ViTDet's 100-epoch COCO recipe (mmdet's projects/ViTDet,
# vitdet_mask-rcnn_vit-b-mae_lsj-100e), with an InLine-DeiT backbone; the detector recipes
# (mask-rcnn_ / retinanet_inline-deit_simple-fpn_lsj-100e_coco.py) add the model.
#   - data: mmdet's common/lsj-100e_coco-instance.py (resize 0.1-2.0 of 1024, crop 1024, flip),
#     each training batch padded to 1024x1024 (BatchFixedSizePad, in the detector recipes);
#     test: longer side to 1024, no fixed-size padding (every block is global: no window grid to fill);
#   - schedule: 184375 iterations at 64 images (16 GPUs x 4), 250-iteration linear warm-up,
#     lr x0.1 at iterations 163889 and 177546; validation every 5000;
#   - AdamW lr 1e-4, betas (0.9, 0.999), weight decay 0.1, layer-wise lr decay 0.7 (ViTDet's rate for
#     12-block ViT-B; every InLine-DeiT has 12 blocks); no weight decay on norms, biases, pos_embed,
#     cls_token (LayerDecayOptimWrapperConstructor).
# On another number of images per batch, train with --auto-scale-lr (linear, base 64), as ViTDet's
# README scales the recipe.
_base_ = [
    'mmdet::common/lsj-100e_coco-instance.py',  # brings mmdet's default runtime
    '../inline_common.py',  # custom_imports (backbones, SimpleFPN, LN2d, the constructor), custom_hooks
]

image_size = (1024, 1024)
norm_cfg = dict(type='LN2d', requires_grad=True)  # the neck's and heads' norm, as ViTDet
# ViTDet's backbone: the last block's map, no cls token in the blocks, no output norm
vitdet_backbone = dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineDeiT', out_indices=(-1,),
                       with_cls_token=False, out_norm=False)

test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
# 16 GPUs x 4 images
train_dataloader = dict(batch_size=4, num_workers=8)
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    constructor='LayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(decay_rate=0.7),
    optimizer=dict(type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.1))

max_iters = 184375
interval = 5000
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=250),
    dict(type='MultiStepLR', begin=0, end=max_iters, by_epoch=False, milestones=[163889, 177546], gamma=0.1),
]
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters, val_interval=interval,
                 dynamic_intervals=[(max_iters // interval * interval + 1, max_iters)])
# checkpoints and last_checkpoint written atomically: a killed write never breaks --resume
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook', by_epoch=False, save_last=True,
                                     interval=interval, max_keep_ckpts=5))
log_processor = dict(type='LogProcessor', window_size=50, by_epoch=False)
auto_scale_lr = dict(base_batch_size=64)
