# InLine-Swin-T backbone: the settings every config for this variant shares.
# Pretrained: the authors' ImageNet-1K checkpoint (top-1 82.4% as they report), by its
# short name inline://inline_swin_t: checkpoints/inline_swin_t.pth if that file exists, else
# the download cache, else downloaded (checkpoints/README.md). To use another file, pass
#   --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.pth
inline_backbone = dict(
    type='InLineSwin',
    arch='tiny',
    init_cfg=dict(type='Pretrained', checkpoint='inline://inline_swin_t'))
# Output channels of the four stages (strides 4, 8, 16, 32): the neck / head inputs.
inline_channels = [96, 192, 384, 768]
# Stochastic depth for detection, per size: Swin-T/S/B 0.2/0.3/0.3, PVT 0.1 (mmdet's PVT default).
# The segmentation recipes set their own (configs/_base_/recipes).
inline_drop_path_rate = 0.2
