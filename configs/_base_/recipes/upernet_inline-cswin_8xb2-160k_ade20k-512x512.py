# UperNet, 160k iterations on ADE20K 512x512, with an InLine-CSwin backbone: CSWin's own
# UperNet recipe (microsoft/CSWin-Transformer segmentation/configs/cswin: AdamW lr 6e-5,
# weight decay 0.01, 1500-iteration linear warm-up, poly decay with power 1.0 to 0, 8 GPUs
# x 2 images), which is the Swin UperNet recipe; CSWin's drop path per size (0.3/0.4/0.6)
# comes with the variant (configs/_base_/backbones/inline-cswin-*.py).
_base_ = './upernet_inline-swin_8xb2-160k_ade20k-512x512.py'

# the base recipe's backbone settings (window size, drop path) do not apply to InLine-CSwin
model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineCSwin'))
