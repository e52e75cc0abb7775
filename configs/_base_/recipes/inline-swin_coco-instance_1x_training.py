# The training the Swin-recipe instance-segmentation models here share (Mask R-CNN, Cascade Mask
# R-CNN): COCO instances with mmdet's Swin Mask R-CNN 1x recipe (AdamW lr 1e-4, weight decay 0.05,
# 1000-iteration warm-up, 8 GPUs x 2 images). A recipe lists it after its model and adds the backbone.
_base_ = [
    'mmdet::_base_/datasets/coco_instance.py',
    '../schedules/inline-swin_adamw_1x.py',  # AdamW, 1000-iteration warm-up
    '../inline_runtime_mmdet.py',  # custom_imports, custom_hooks, atomic checkpoints
]

optim_wrapper = dict(paramwise_cfg=_base_.inline_paramwise_cfg)

# 8 GPUs x 2 images (the data base's batch_size=2); auto_scale_lr's base_batch_size is 16.
train_dataloader = dict(batch_size=2)
