# RetinaNet + FPN, 1x schedule on COCO, with an InLine-PVT backbone: mmdet's PVT
# RetinaNet recipe (AdamW lr 1e-4, weight decay 1e-4, 500-iteration warm-up,
# 8 GPUs x 2 images). mmdet's PVT RetinaNet skips the stride-4 map (start_level=1);
# here that stage is not returned at all (out_indices=(1, 2, 3), start_level=0): the
# same FPN, and no unused output norm for distributed training to complain about.
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    'mmdet::_base_/schedules/schedule_1x.py',
    '../inline_runtime_mmdet.py',  # custom_imports, custom_hooks, atomic checkpoints
]

model = dict(
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLinePVT', out_indices=(1, 2, 3)),
    neck=dict(start_level=0, num_outs=5))

optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(_delete_=True, type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.0001),
    paramwise_cfg=_base_.inline_paramwise_cfg)

train_dataloader = dict(batch_size=2)
