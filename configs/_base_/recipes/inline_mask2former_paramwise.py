# Optimiser groups of every Mask2Former recipe here (COCO instance and panoptic, ADE20K, Cityscapes),
# after mmdet's and mmseg's Swin Mask2Former recipes: the query heads' keys (backbone at 0.1x the
# learning rate, its norms and position tables without weight decay: inline_query-heads_paramwise.py)
# and no weight decay on norm layers that no key names (their norm_decay_mult=0). A recipe replaces
# its base's groups with these: paramwise_cfg=dict(_base_.inline_mask2former_paramwise_cfg, _delete_=True).
_base_ = './inline_query-heads_paramwise.py'
inline_mask2former_paramwise_cfg = dict(custom_keys=_base_.inline_query_heads_keys, norm_decay_mult=0.0)
