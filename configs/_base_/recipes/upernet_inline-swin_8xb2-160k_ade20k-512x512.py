# UperNet, 160k iterations on ADE20K 512x512, with an InLine-Swin backbone: mmseg's
# Swin UperNet recipe (AdamW lr 6e-5, weight decay 0.01, 1500-iteration linear warm-up,
# then poly decay with power 1.0 to 0, 8 GPUs x 2 images, drop path 0.3). A config
# under configs/upernet/ adds the variant.
_base_ = [
    'mmseg::_base_/models/upernet_swin.py',
    './inline_ade20k-512x512_8xb2-160k_training.py',  # data, optimizer, schedule, runtime
]

crop_size = (512, 512)
data_preprocessor = dict(size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7, drop_path_rate=0.3),
    decode_head=dict(num_classes=150),
    auxiliary_head=dict(num_classes=150))
