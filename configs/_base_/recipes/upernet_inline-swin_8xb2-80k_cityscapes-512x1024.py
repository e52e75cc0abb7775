# UperNet, 80k iterations on Cityscapes (19 classes), 512x1024 crops, with an InLine-Swin backbone:
# the Swin UperNet recipe of the ADE20K configs (AdamW lr 6e-5, weight decay 0.01, 1500-iteration
# linear warm-up, then poly decay with power 1.0 to 0, 8 GPUs x 2 images, drop path 0.3) on mmseg's
# Cityscapes data and 80k schedule. The test is mode 'whole': the 1024x2048 image in one pass, where
# an InLine backbone attends globally. A config under configs/upernet/ adds the variant.
_base_ = [
    'mmseg::_base_/models/upernet_swin.py',
    './inline_cityscapes-512x1024_8xb2-80k_training.py',  # data, optimizer, schedule, runtime
]

crop_size = (512, 1024)
data_preprocessor = dict(size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7, drop_path_rate=0.3),
    decode_head=dict(num_classes=19),
    auxiliary_head=dict(num_classes=19),
    test_cfg=dict(mode='whole'))
