# A tiny InLine-DeiT (width 64, 4 blocks, 2 heads, patch 16, position grid of the 128x128 toy images)
# for the toy configs, trained from scratch: no pretrained weights on the toy data.
inline_backbone = dict(
    type='InLineDeiT',
    embed_dims=64,
    depth=4,
    num_heads=2,
    pretrain_img_size=128,
    drop_path_rate=0.0,
    init_cfg=None)
inline_width = 64
