# RetinaNet + FPN, 1x schedule on COCO, with an InLine-Swin backbone (AdamW lr 1e-4,
# weight decay 0.05, 1000-iteration warm-up, 8 GPUs x 2 images). As in mmdet's Swin
# RetinaNet, only stages 1-3 feed the FPN (start_level=0 over those three; P6/P7 come
# from the last input), so no backbone output goes unused.
_base_ = [
    'mmdet::_base_/models/retinanet_r50_fpn.py',
    'mmdet::_base_/datasets/coco_detection.py',
    '../schedules/inline-swin_adamw_1x.py',  # AdamW, 1000-iteration warm-up
    '../inline_runtime_mmdet.py',  # custom_imports, custom_hooks, atomic checkpoints
]

model = dict(
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7,
                  out_indices=(1, 2, 3)),
    neck=dict(start_level=0, num_outs=5))

optim_wrapper = dict(paramwise_cfg=_base_.inline_paramwise_cfg)

train_dataloader = dict(batch_size=2)
