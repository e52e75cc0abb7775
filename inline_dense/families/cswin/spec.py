"""InLine-CSwin: CSwin Transformer whose InLine blocks attend over the whole feature map (its facts,
as plain data)."""

from ..spec import Configs, FamilySpec, Fixture, Head, Output, Preset, Weights, stage_outputs, tsinghua


def outputs(arch: Preset) -> tuple[Output, ...]:
    return stage_outputs(arch, [4 * 2 ** i for i in range(len(arch['depths']))])  # a stride-4 stem, then merges


SPEC = FamilySpec(
    name='cswin',
    title='CSwin',
    class_name='InLineCSwin',
    presets={
        'tiny': dict(embed_dims=64, depths=(2, 4, 18, 1), num_heads=(2, 4, 8, 16), split_size=(1, 2, 7, 7),
                     attn_type='IISS'),
        'small': dict(embed_dims=64, depths=(3, 6, 29, 2), num_heads=(2, 4, 8, 16), split_size=(1, 2, 7, 7),
                      attn_type='IISS'),
        'base': dict(embed_dims=96, depths=(3, 6, 29, 2), num_heads=(4, 8, 16, 32), split_size=(1, 2, 7, 7),
                     attn_type='IISS'),
    },
    weights=(
        Weights('inline_cswin_t', 'tiny', tsinghua('49fa2ecc543647c4b970'), 83.2),
        Weights('inline_cswin_s', 'small', tsinghua('59f4e65f776f4052b93c'), 83.8),
        Weights('inline_cswin_b', 'base', tsinghua('91e17121df284ae38521'), 84.5),
    ),
    key_patterns=(r'^stage1_conv_embed\.', r'^stem\.conv\.'),
    head=Head(final_norm=True, first_conv='backbone.stem.conv'),
    outputs=outputs,
    tiny=dict(embed_dims=16, depths=(1, 1, 2, 1), num_heads=(2, 2, 4, 8), split_size=(1, 2, 3, 3), attn_type='ISIS'),
    every_kind_once=dict(depths=(1, 1, 1, 1)),  # a stage's blocks are all alike
    shrunk_depths=(1, 1, 1, 1),
    small=dict(embed_dims=32, depths=(1, 1, 2, 1), num_heads=(2, 2, 4, 8)),  # stripe stages split heads in two
    fixture=Fixture('inline_cswin_mini', dict(embed_dim='embed_dims', depth='depths', num_heads='num_heads',
                                              split_size='split_size', attn_type='attn_type', mlp_ratio='mlp_ratio')),
    configs=Configs(drop_path=dict(tiny=0.2, small=0.3, base=0.3),
                    drop_path_note='CSWin publishes no detection configs, so these follow the Swin detection '
                                   'recipes (T/S/B 0.2/0.3/0.3)',
                    seg_drop_path=dict(tiny=0.3, small=0.4, base=0.6),
                    seg_drop_path_note="CSWin's own UperNet configs (microsoft/CSWin-Transformer, "
                                       'segmentation/configs/cswin: T/S/B 0.3/0.4/0.6)'),
)
