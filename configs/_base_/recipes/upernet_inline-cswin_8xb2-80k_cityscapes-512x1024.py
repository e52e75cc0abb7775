# UperNet, 80k iterations on Cityscapes 512x1024, with an InLine-CSwin backbone: the Swin recipe
# (upernet_inline-swin_8xb2-80k_cityscapes-512x1024.py), as on ADE20K where CSWin's own UperNet recipe
# is Swin's; CSWin's drop path per size (0.3/0.4/0.6, its ADE20K values) comes with the variant.
_base_ = './upernet_inline-swin_8xb2-80k_cityscapes-512x1024.py'

# the base recipe's backbone settings (window size, drop path) do not apply to InLine-CSwin
model = dict(backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineCSwin'))
