# Shared by every InLine recipe: registers the backbones, and the parameters kept
# out of weight decay.
custom_imports = dict(imports=['inline_dense'], allow_failed_imports=False)

# mmengine matches a custom key as a substring of the parameter name:
#   'norm' -> the LayerNorms of blocks (norm1/norm2), patch embedding, patch merging
#             and the output norms (out_norms.*);
#   'relative_position_bias_table' -> InLine-Swin's softmax blocks;
#   'pos_embed' -> InLine-PVT's position embeddings (stages.*.pos_embed).
inline_paramwise_cfg = dict(
    custom_keys={
        'norm': dict(decay_mult=0.),
        'relative_position_bias_table': dict(decay_mult=0.),
        'pos_embed': dict(decay_mult=0.),
    })

# Reliability (inline_dense.engine): padded tokens ignored by global attention, so an
# image's features do not depend on its batch-mates; and a resumed run draws the same
# random numbers as an uninterrupted one.
custom_hooks = [dict(type='InLinePaddingMaskHook'), dict(type='DeterministicResumeHook')]
