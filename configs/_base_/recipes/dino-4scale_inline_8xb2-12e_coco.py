# DINO-4scale, 12 epochs on COCO, with an InLine backbone: mmdet's R50 recipe
# (AdamW lr 1e-4, weight decay 1e-4, backbone at 0.1x lr, step at epoch 11, 8 GPUs x 2 images,
# gradient clipping 0.1). The backbone gives stages 1-3 (strides 8, 16, 32) as ResNet's C3-C5;
# the channel mapper adds the fourth level (stride 64). A config under configs/dino/ adds the variant.
_base_ = [
    'mmdet::dino/dino-4scale_r50_8xb2-12e_coco.py',
    '../inline_common.py',  # custom_imports, custom_hooks (the mmdet base brings the runtime)
    './inline_query-heads_paramwise.py',
]
model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, out_indices=(1, 2, 3)))
optim_wrapper = dict(paramwise_cfg=dict(_delete_=True, custom_keys=_base_.inline_query_heads_keys))
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
