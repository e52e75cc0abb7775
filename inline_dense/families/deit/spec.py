"""InLine-DeiT: a plain ViT (DeiT) whose every block is global InLine attention (its facts, as plain data)."""

from ..spec import Configs, FamilySpec, Fixture, Groups, Head, Output, Preset, Weights, tsinghua

PATCH_SIZE = 16  # the model's default patch_size: every block's map has stride 16


def outputs(arch: Preset) -> tuple[Output, ...]:
    """One output per block (mmseg's ViT ``out_indices`` convention), all at the patch stride."""
    return tuple(Output(arch['embed_dims'], PATCH_SIZE) for _ in range(arch['depth']))


SPEC = FamilySpec(
    name='deit',
    title='DeiT',
    class_name='InLineDeiT',
    # each trained at its own resolution: the position embedding's grid is pretrain_img_size / 16
    presets={
        'tiny': dict(embed_dims=192, depth=12, num_heads=6, pretrain_img_size=224),
        'small': dict(embed_dims=320, depth=12, num_heads=10, pretrain_img_size=288),
        'base': dict(embed_dims=384, depth=12, num_heads=12, pretrain_img_size=448),
    },
    weights=(
        Weights('inline_deit_t', 'tiny', tsinghua('1d6b8191ad6d4114b291'), 74.5, input_size=224),
        Weights('inline_deit_s', 'small', tsinghua('2f3898b07e9247f3beb3'), 80.2, input_size=288),
        Weights('inline_deit_b', 'base', tsinghua('10bdd726d4b0435eb34e'), 82.3, input_size=448),
    ),
    # the authors' blocks (Swin's are layers.i.blocks.j, PVT's block1.j) and our stem's cls token
    key_patterns=(r'^blocks\.\d+\.attn\.', r'^patch_embed\.cls_token$'),
    # timm's ViT: the head reads the cls token after the final norm
    head=Head(final_norm=True, first_conv='backbone.patch_embed.proj', no_weight_decay=('pos_embed', 'cls_token'),
              groups=Groups(stem=r'^backbone\.patch_embed\.', coarse=r'^backbone\.stages\.(\d+)',
                            fine=((r'^backbone\.stages\.(\d+)', None), (r'^norm', (99999,)))),
              pool='token'),
    outputs=outputs,
    tiny=dict(embed_dims=16, depth=4, num_heads=2),  # as many blocks as the pyramids' stages (the tests freeze 4)
    every_kind_once=dict(depth=1),  # every block is alike
    shrunk_depths=(1, 1),  # two blocks (spec.shrunk(): depth=2)
    small=dict(embed_dims=96, depth=3, num_heads=3),
    fixture=Fixture('inline_deit_mini', dict(embed_dim='embed_dims', depth='depth', num_heads='num_heads',
                                             mlp_ratio='mlp_ratio', qkv_bias='qkv_bias', img_size='pretrain_img_size',
                                             patch_size='patch_size'),
                    fixed=dict(out_indices=(0, 1, 2, 3))),  # every block of the fixture's 4
    configs=Configs(drop_path=dict(tiny=0.1, small=0.1, base=0.1),
                    drop_path_note="ViTDet's and mmseg's ViT-B rate (0.1) for every size: the plain backbones are "
                                   'at most ViT-B wide'),
)
