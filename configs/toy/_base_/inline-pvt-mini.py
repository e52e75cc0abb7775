# A tiny InLine-PVT (embed 32-256, one block per stage) for the toy configs, trained from
# scratch: no pretrained weights on the toy data.
inline_backbone = dict(
    type='InLinePVT',
    embed_dims=(32, 64, 128, 256),
    depths=(1, 1, 1, 1),
    num_heads=(1, 2, 4, 8),
    mlp_ratios=(4, 4, 4, 4),
    pretrain_img_size=128,
    drop_path_rate=0.0,
    out_indices=(0, 1, 2, 3),
    init_cfg=None)
# Output channels of the four stages (strides 4, 8, 16, 32): the neck / head inputs.
inline_channels = [32, 64, 128, 256]
