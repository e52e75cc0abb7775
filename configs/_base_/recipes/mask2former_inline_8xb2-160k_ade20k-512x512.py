# Mask2Former semantic segmentation, 160k iterations on ADE20K 512x512, with an InLine backbone:
# mmseg's Swin recipe (AdamW lr 1e-4, weight decay 0.05, poly decay power 0.9, backbone at 0.1x lr
# without decay on its norms, 8 GPUs x 2 images). A config under configs/mask2former/ adds the variant.
_base_ = [
    'mmseg::mask2former/mask2former_r50_8xb2-160k_ade20k-512x512.py',
    './inline_mask2former_paramwise.py',
]
model = dict(backbone=dict(out_indices=(0, 1, 2, 3), out_norm=True, frozen_stages=-1, with_cp=False,
                          _delete_=True))
optim_wrapper = dict(paramwise_cfg=dict(_base_.inline_mask2former_paramwise_cfg, _delete_=True))
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook'))
# mmseg's base imports mmdet.models (Mask2Former's transformer parts); the adapter registers the
# backbones and the hooks of configs/_base_/inline_common.py, which cannot be a base here (both
# would set custom_imports).
custom_imports = dict(imports=['inline_dense.openmmlab', 'mmdet.models'], allow_failed_imports=False)
custom_hooks = [dict(type='InLinePaddingMaskHook'), dict(type='DeterministicResumeHook')]
