# InLine-CSwin-T backbone: the settings every config for this variant shares.
# Pretrained: the authors' ImageNet-1K checkpoint (top-1 83.2% as they report), by its
# short name inline://inline_cswin_t: checkpoints/inline_cswin_t.pth if that file exists, else
# the download cache, else downloaded (checkpoints/README.md). To use another file, pass
#   --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.pth
inline_backbone = dict(
    type='InLineCSwin',
    arch='tiny',
    init_cfg=dict(type='Pretrained', checkpoint='inline://inline_cswin_t'))
# Output channels of the four stages (strides 4, 8, 16, 32): the neck / head inputs.
inline_channels = [64, 128, 256, 512]
# Stochastic depth for detection, per size: CSWin publishes no detection configs, so these
# follow the Swin detection recipes (T/S/B 0.2/0.3/0.3).
inline_drop_path_rate = 0.2
# Stochastic depth for ADE20K (UperNet and Semantic FPN): CSWin's own UperNet configs
# (microsoft/CSWin-Transformer, segmentation/configs/cswin: T/S/B 0.3/0.4/0.6).
inline_seg_drop_path_rate = 0.3
