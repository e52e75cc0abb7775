# The codebase-independent part of the two runtime bases (inline_runtime_mmdet.py,
# inline_runtime_mmseg.py). Configs list one of those, not this file.

# The OpenMMLab adapter: registers the backbones (InLineSwin, InLinePVT, InLineCSwin) and the
# engine hooks below (the torch-only core, inline_dense.models, registers nothing).
custom_imports = dict(imports=['inline_dense.openmmlab'], allow_failed_imports=False)

# Reliability (inline_dense.openmmlab.engine): padded tokens ignored by global attention, so an
# image's features do not depend on its batch-mates; and a resumed run draws the same
# random numbers as an uninterrupted one.
custom_hooks = [dict(type='InLinePaddingMaskHook'), dict(type='DeterministicResumeHook')]

# Parameters kept out of weight decay, for the recipes' optim_wrapper.paramwise_cfg.
# mmengine matches a custom key as a substring of the parameter name:
#   'norm' -> the LayerNorms of blocks (norm1/norm2), patch embedding, patch merging
#             and the output norms (out_norms.*), in every backbone;
#   'relative_position_bias_table' -> InLine-Swin's softmax blocks;
#   'pos_embed' -> InLine-PVT's position embeddings (stages.*.pos_embed).
# InLine-CSwin has no position parameters (its LePE convolutions are ordinary weights).
inline_paramwise_cfg = dict(
    custom_keys={
        'norm': dict(decay_mult=0.),
        'relative_position_bias_table': dict(decay_mult=0.),
        'pos_embed': dict(decay_mult=0.),
    })

# The backbone settings every COCO / ADE20K recipe here starts from (the names of mmdet's and
# mmseg's Swin recipes): all four stages out, each through its own LayerNorm, nothing frozen,
# no activation checkpointing. A recipe adds the type (and InLine-Swin its window_size):
#   backbone=dict(_base_.inline_recipe_backbone, _delete_=True, type='InLineSwin', window_size=7)
inline_recipe_backbone = dict(out_indices=(0, 1, 2, 3), out_norm=True, frozen_stages=-1, with_cp=False)
