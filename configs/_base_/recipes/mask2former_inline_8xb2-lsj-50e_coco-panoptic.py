# Mask2Former panoptic segmentation on COCO (80 thing + 53 stuff classes), large-scale jitter,
# 50 epochs (368750 iterations), with an InLine backbone: mmdet's Swin recipe (AdamW lr 1e-4,
# weight decay 0.05, backbone at 0.1x lr without decay on its norms, drop path 0.3, 8 GPUs x 2
# images); PQ with CocoPanopticMetric, box and mask AP of the thing instances with CocoMetric. All
# four stages feed the pixel decoder. The instance recipe's twin (mask2former_inline_8xb2-lsj-50e_coco.py):
# mmdet's panoptic base instead of its instance one. A config under configs/mask2former/ adds the variant.
_base_ = [
    'mmdet::mask2former/mask2former_r50_8xb2-lsj-50e_coco-panoptic.py',
    '../inline_common.py',  # custom_imports, custom_hooks (the mmdet base brings the runtime)
    './inline_mask2former_paramwise.py',
]
model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, drop_path_rate=0.3), init_cfg=None)
optim_wrapper = dict(paramwise_cfg=dict(_base_.inline_mask2former_paramwise_cfg, _delete_=True))
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
