"""InLine-PVT: Pyramid Vision Transformer whose InLine stages attend globally (its facts, as plain data)."""
import math

from ..spec import Baseline, Configs, FamilySpec, Fixture, Head, Output, Preset, Weights, stage_outputs, tsinghua

PATCH_SIZES = (4, 2, 2, 2)  # the model's default patch_sizes: stage i has stride prod(PATCH_SIZES[:i + 1])


def outputs(arch: Preset) -> tuple[Output, ...]:
    return stage_outputs(arch, [math.prod(PATCH_SIZES[:i + 1]) for i in range(len(arch['depths']))])


SPEC = FamilySpec(
    name='pvt',
    title='PVT',
    class_name='InLinePVT',
    presets={
        'tiny': dict(embed_dims=(64, 128, 320, 512), depths=(2, 2, 2, 2), num_heads=(2, 4, 10, 16),
                     mlp_ratios=(8, 8, 4, 4)),
        'small': dict(embed_dims=(64, 128, 320, 512), depths=(3, 4, 6, 3), num_heads=(2, 4, 10, 16),
                      mlp_ratios=(8, 8, 4, 4)),
        'medium': dict(embed_dims=(64, 128, 320, 512), depths=(3, 4, 18, 3), num_heads=(2, 4, 10, 16),
                       mlp_ratios=(8, 8, 4, 4)),
        'large': dict(embed_dims=(64, 128, 320, 512), depths=(3, 8, 27, 3), num_heads=(2, 4, 10, 16),
                      mlp_ratios=(8, 8, 4, 4)),
    },
    weights=(
        Weights('inline_pvt_t', 'tiny', tsinghua('90ac52b1555b401eb5e6'), 78.2),
        Weights('inline_pvt_s', 'small', tsinghua('1ab953b2479d433080a3'), 82.0),
        Weights('inline_pvt_m', 'medium', tsinghua('a72aec31e6084bc0a280'), 83.2),
        Weights('inline_pvt_l', 'large', tsinghua('efd91318ba964f01b288'), 83.6),
    ),
    key_patterns=(r'^block1\.', r'^patch_embed1\.', r'^pos_embed1', r'^stages\.\d+\.pos_embed'),
    head=Head(final_norm=False, first_conv='backbone.stages.0.patch_embed.proj', no_weight_decay=('pos_embed',)),
    outputs=outputs,
    tiny=dict(embed_dims=(16, 32, 64, 128), depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8), attn_type='IISS'),
    every_kind_once={},
    shrunk_depths=(1, 1, 1, 1),
    small=dict(embed_dims=32, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8)),
    fixture=Fixture('inline_pvt_mini', dict(embed_dims='embed_dims', depths='depths', num_heads='num_heads',
                                            mlp_ratios='mlp_ratios', attn_type='attn_type', sr_ratios='sr_ratios',
                                            qkv_bias='qkv_bias')),
    configs=Configs(drop_path=dict(tiny=0.1, small=0.1, medium=0.1, large=0.1),
                    drop_path_note="mmdet's PVT default (0.1) for every size; the segmentation recipes set their "
                                   'own (configs/_base_/recipes)'),
    # mmdet's PVT v1 defaults are the paper's (embed 64, heads 1-2-5-8, sr 8-4-2-1, mlp 8-8-4-4); the
    # preset gives the depths
    baseline=Baseline('pvt', 'PyramidVisionTransformer', dict(num_layers='depths'), dict(drop_path_rate=0.1)),
)
