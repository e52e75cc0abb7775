# Semantic FPN, 80k iterations on ADE20K 512x512, with an InLine-PVT backbone: the PVT
# Semantic FPN recipe (AdamW lr 2e-4, weight decay 1e-4, poly decay with power 0.9 to 0,
# 4 GPUs x 4 images, drop path 0.1). A config under configs/sem_fpn/ adds the variant.
_base_ = [
    'mmseg::_base_/models/fpn_r50.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/schedules/schedule_80k.py',
    '../inline_runtime_mmseg.py',  # custom_imports, custom_hooks
]

crop_size = (512, 512)
data_preprocessor = dict(size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,  # the ResNet base's 'open-mmlab://resnet50_v1c'; ours is in backbone.init_cfg
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLinePVT', drop_path_rate=0.1),
    decode_head=dict(num_classes=150))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.0002, betas=(0.9, 0.999), weight_decay=0.0001),
    paramwise_cfg=_base_.inline_paramwise_cfg,
    clip_grad=None)
param_scheduler = [
    dict(type='PolyLR', eta_min=0.0, power=0.9, begin=0, end=80000, by_epoch=False),
]

# 4 GPUs x 4 images
train_dataloader = dict(batch_size=4)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader

# checkpoints and last_checkpoint written atomically: a killed write never breaks --resume
# (set here, after the schedule base that owns default_hooks; see inline_runtime_mmseg.py)
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
