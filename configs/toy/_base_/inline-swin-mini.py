# A tiny InLine-Swin (embed 32, one block per stage, 4x4 windows) for the toy configs,
# trained from scratch: no pretrained weights on the toy data.
inline_backbone = dict(
    type='InLineSwin',
    embed_dims=32,
    depths=(1, 1, 1, 1),
    num_heads=(1, 2, 4, 8),
    attn_type='IIIS',
    window_size=4,
    drop_path_rate=0.0,
    out_indices=(0, 1, 2, 3),
    init_cfg=None)
# Output channels of the four stages (strides 4, 8, 16, 32): the neck / head inputs.
inline_channels = [32, 64, 128, 256]
