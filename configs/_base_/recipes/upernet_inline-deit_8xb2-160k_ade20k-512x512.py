# UperNet, 160k iterations on ADE20K 512x512, with an InLine-DeiT backbone: mmseg's ViT / DeiT
# UperNet recipe (vit_deit-*_mln_upernet_8xb2-160k: AdamW lr 6e-5, weight decay 0.01 without decay on
# norms, pos_embed and cls_token, 1500-iteration linear warm-up, then poly decay with power 1.0 to 0,
# 8 GPUs x 2 images, drop path 0.1). The maps of blocks 2, 5, 8, 11 (stride 16, cls token kept in the
# blocks as mmseg's ViT) go through mmseg's MultiLevelNeck (rescaled 4x, 2x, 1x, 0.5x: strides 4-32).
# A config under configs/upernet/ adds the variant and its width.
_base_ = [
    'mmseg::_base_/models/upernet_vit-b16_ln_mln.py',
    './inline_ade20k-512x512_8xb2-160k_training.py',  # data, optimizer, schedule, runtime
]

crop_size = (512, 512)
data_preprocessor = dict(size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineDeiT', out_indices=(2, 5, 8, 11),
                  with_cls_token=True, out_norm=False),
    decode_head=dict(num_classes=150),
    auxiliary_head=dict(num_classes=150))

optim_wrapper = dict(paramwise_cfg=dict(custom_keys=dict(cls_token=dict(decay_mult=0.))))
