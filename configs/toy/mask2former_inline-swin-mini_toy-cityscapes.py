# Mask2Former semantic segmentation with a tiny InLine-Swin (embed 32, one block per stage), trained from
# scratch on the toy Cityscapes data (64x128 crops) on CPU; evaluated with mIoU on whole 128x256 images
# (test mode 'whole', as mmseg's Cityscapes configs test).
#   python tools/train.py configs/toy/mask2former_inline-swin-mini_toy-cityscapes.py
# mmseg's 90k Cityscapes recipe's model (as its 160k ADE20K one), the head at toy width
# (_base_/mask2former_inline-swin-mini_mmseg.py), 20 queries for the 19 classes (six occur).
_base_ = ['./_base_/toy-cityscapes.py', './_base_/mask2former_inline-swin-mini_mmseg.py']

model = dict(data_preprocessor=dict(size=_base_.crop_size),
             decode_head=dict(num_classes=_base_.num_classes, num_queries=20, loss_cls=dict(
                 class_weight=[1.0] * _base_.num_classes + [_base_.m2f_no_object_weight])))
