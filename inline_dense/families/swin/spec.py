"""InLine-Swin: Swin Transformer whose InLine blocks attend globally (its facts, as plain data)."""

from ..spec import Baseline, Configs, FamilySpec, Fixture, Head, Output, Preset, Weights, stage_outputs, tsinghua

PATCH_SIZE = 4  # the model's default patch_size: stage i has stride 4 * 2^i


def outputs(arch: Preset) -> tuple[Output, ...]:
    return stage_outputs(arch, [PATCH_SIZE * 2 ** i for i in range(len(arch['depths']))])


SPEC = FamilySpec(
    name='swin',
    title='Swin',
    class_name='InLineSwin',
    presets={
        'tiny': dict(embed_dims=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24), attn_type='IIIS'),
        'small': dict(embed_dims=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24), attn_type='IISS'),
        'base': dict(embed_dims=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32), attn_type='IIMS2'),
    },
    weights=(
        Weights('inline_swin_t', 'tiny', tsinghua('32810869fcc34410966b'), 82.4),
        Weights('inline_swin_s', 'small', tsinghua('e9657fd247c04c7cb1a1'), 83.6),
        Weights('inline_swin_b', 'base', tsinghua('bf23564bb64c420aafe1'), 84.1),
    ),
    key_patterns=(r'^layers\.', r'\.downsample\.reduction\.'),
    head=Head(final_norm=True, first_conv='backbone.patch_embed.proj',
              no_weight_decay=('relative_position_bias_table',)),
    outputs=outputs,
    tiny=dict(embed_dims=16, depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8), attn_type='IIMS1'),
    # the mixed stage (an InLine block, then a shifted softmax one) and one plain softmax block
    every_kind_once=dict(depths=(1, 1, 2, 1)),
    shrunk_depths=(1, 1, 3, 1),  # 3 blocks in stage 3 for InLine-Swin-B's mixed stage ('IIMS2')
    small=dict(embed_dims=32, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8)),
    fixture=Fixture('inline_swin_mini', dict(embed_dim='embed_dims', depths='depths', num_heads='num_heads',
                                             attn_type='attn_type')),
    configs=Configs(drop_path=dict(tiny=0.2, small=0.3, base=0.3),
                    drop_path_note='the Swin detection recipes (mmdet configs/swin: T/S/B 0.2/0.3/0.3); the '
                                   'segmentation recipes set their own (configs/_base_/recipes)'),
    baseline=Baseline('swin', 'SwinTransformer', dict(embed_dims='embed_dims', depths='depths', num_heads='num_heads'),
                      dict(window_size=7, drop_path_rate=0.1)),
)
