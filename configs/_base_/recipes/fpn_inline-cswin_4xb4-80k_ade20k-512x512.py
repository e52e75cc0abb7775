# Semantic FPN, 80k iterations on ADE20K 512x512, with an InLine-CSwin backbone. CSWin
# reports Semantic FPN 80k results but publishes no config, so this is the Semantic FPN
# recipe of the PVT configs (AdamW lr 2e-4, weight decay 1e-4, poly decay with power 0.9
# to 0, 4 GPUs x 4 images) with the backbone swapped; the drop path per size is CSWin's
# ADE20K one (0.3/0.4/0.6, with the variant: configs/_base_/backbones/inline-cswin-*.py).
_base_ = './fpn_inline-pvt_4xb4-80k_ade20k-512x512.py'

# the base recipe's backbone settings (window size, drop path) do not apply to InLine-CSwin
model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineCSwin'))
