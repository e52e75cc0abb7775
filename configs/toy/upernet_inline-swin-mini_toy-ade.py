# UperNet with a tiny InLine-Swin (embed 32, one block per stage), trained from scratch on the
# toy ADE20K data in a few CPU minutes; evaluated with mIoU.
#   python tools/train.py configs/toy/upernet_inline-swin-mini_toy-ade.py
_base_ = [
    './_base_/upernet_inline-swin-mini.py',  # the model at toy width
    './_base_/toy-ade.py',
    './_base_/toy-runtime_mmseg.py',  # toy schedule; custom_imports, custom_hooks, atomic checkpoints
]

model = dict(data_preprocessor=dict(size=_base_.crop_size), decode_head=dict(num_classes=_base_.num_classes),
             auxiliary_head=dict(num_classes=_base_.num_classes))
