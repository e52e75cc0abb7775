# Optimiser groups for the query-based heads' recipes (DINO, Mask2Former): mmdet's / mmseg's
# Swin recipes train the backbone at 0.1x the learning rate, with no weight decay on its norms
# and position tables. mmengine gives a parameter the LONGEST custom key found in its name, and a
# matched parameter skips norm_decay_mult: 'backbone' alone would therefore decay the backbone's
# norms, so each norm gets a longer key (up to 32 blocks per stage, more than any variant has).
# The house keys (configs/_base_/inline_common.py: 'norm', 'relative_position_bias_table',
# 'pos_embed') keep the head's norms out of weight decay too.
inline_backbone_frozen_decay = dict(lr_mult=0.1, decay_mult=0.0)
inline_query_heads_keys = dict(
    {'backbone': dict(lr_mult=0.1, decay_mult=1.0),
     'norm': dict(decay_mult=0.),
     'pos_embed': dict(decay_mult=0.),
     'relative_position_bias_table': inline_backbone_frozen_decay,
     'backbone.out_norms': inline_backbone_frozen_decay,
     'backbone.patch_embed.norm': inline_backbone_frozen_decay,
     'backbone.stem.norm': inline_backbone_frozen_decay},
    **{f'backbone.stages.{stage}.blocks.{block}.norm': inline_backbone_frozen_decay
       for stage in range(4) for block in range(32)},
    **{f'backbone.stages.{stage}.{part}.norm': inline_backbone_frozen_decay
       for stage in range(4) for part in ('downsample', 'merge')})
