# UperNet with a tiny InLine-Swin (embed 32, one block per stage), trained from scratch on the toy
# Cityscapes data (64x128 crops) in a few CPU minutes; evaluated with mIoU on whole 128x256 images.
#   python tools/train.py configs/toy/upernet_inline-swin-mini_toy-cityscapes.py
_base_ = [
    './_base_/upernet_inline-swin-mini.py',  # the model at toy width
    './_base_/toy-cityscapes.py',
    './_base_/toy-runtime_mmseg.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
]

model = dict(data_preprocessor=dict(size=_base_.crop_size), decode_head=dict(num_classes=_base_.num_classes),
             auxiliary_head=dict(num_classes=_base_.num_classes),
             test_cfg=dict(mode='whole'))  # the whole 2:1 image at once, as mmseg's Cityscapes configs test
