"""InLine-CSwin: CSwin Transformer whose InLine blocks attend over the whole feature map."""
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from ...layers import fused, padding
from ...layers.backbone import InLineBackboneBase
from ...layers.block import TransformerBlock, inline_attention, transformer_block
from ...layers.settings import resolve_settings
from ...layers.tensor_utils import channels_last, tokens_to_map
from ...typing import HW
from .convert import convert_authors_layout
from .spec import SPEC
from .stripe_attention import CSwinStripeAttention


class ConvDownsample(nn.Module):
    """Conv (kernel ``kernel``, stride ``stride``) on the token grid, then LayerNorm.

    Map (B, C_in, H, W) -> tokens (B, H'*W', C_out) and (H', W'), H' = ceil(H / stride) for the
    paddings used here (stem: 7/4/2 on a multiple of 4; merge: 3/2/1).
    """

    def __init__(self, in_dims: int, out_dims: int, kernel: int, stride: int, padding: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_dims, out_dims, kernel, stride=stride, padding=padding)
        self.norm = nn.LayerNorm(out_dims)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, HW]:
        x = self.conv(channels_last(x) if torch.jit.is_scripting() else fused.conv_input(x))
        return self.norm(x.flatten(2).transpose(1, 2)), (x.shape[2], x.shape[3])


class CSwinStage(nn.Module):
    """A convolutional merge into the stage (but the first), then its blocks."""

    def __init__(self, merge: ConvDownsample | None, blocks: list[TransformerBlock]) -> None:
        super().__init__()
        self.merge = merge
        self.blocks = nn.ModuleList(blocks)

    def enter(self, x: torch.Tensor, hw: HW, valid_hw: list[HW] | None, stride: int) -> tuple[torch.Tensor, HW]:  # noqa: ARG002
        """Tokens (B, N, C) of grid ``hw`` -> this stage's tokens and grid (the merge, if any)."""
        if self.merge is None:
            return x, hw
        return self.merge(tokens_to_map(x, hw))

    def leave(self, x: torch.Tensor, hw: HW) -> tuple[torch.Tensor, HW]:
        return x, hw


def stripe_attention(dims: int, num_heads: int, split_size: int, branches: int, qkv_bias: bool, attn_drop: float,
                     proj_drop: float, where: str) -> CSwinStripeAttention:
    """``CSwinStripeAttention``, its ValueError (e.g. heads that do not split in two branches) naming
    ``where`` (the family and stage)."""
    try:
        return CSwinStripeAttention(dims, num_heads, split_size, branches, qkv_bias, attn_drop, proj_drop)
    except ValueError as exc:
        raise ValueError(f'{where}: {exc}') from None


class InLineCSwin(InLineBackboneBase):
    """InLine-CSwin backbone (Han et al., NeurIPS 2024) for dense prediction.

    InLine blocks attend over the whole feature map at any resolution (with LePE, and a
    local residual predicted from the block input before ``norm1``, as the authors' model);
    softmax blocks attend in cross-shaped stripes of width ``split_size`` (two branches),
    except in the last stage, which attends over the whole map (one branch).

    Args:
        arch: 'tiny', 'small', 'base' or a dict with embed_dims/depths/num_heads/split_size/attn_type.
        embed_dims, depths, num_heads, split_size, attn_type: override the arch's values (an int
            split_size: the same for every stage).
            attn_type has one letter per stage: I (InLine) or S (softmax stripes).
        mlp_ratio: MLP hidden width over C.
        kernel, attn_impl: phi and evaluation of InLine attention, as in ``InLineSwin``.
        out_indices: stages whose outputs are returned, as (B, 2^i C, H/2^(i+2), W/2^(i+2)).
        out_norm: LayerNorm on every returned stage output.
        frozen_stages: -1 none; 0 the stem; k also the first k stages (with their merges).
        with_cp: activation checkpointing in every block.

    Weights are initialised at construction; the authors' ImageNet weights load with
    ``inline_dense.checkpoint.load_pretrained(model, 'inline://<variant>')``, a CSwin variant of
    ``inline_dense.variants``.
    """

    arch_zoo = SPEC.presets

    if TYPE_CHECKING:  # set by InLineBackboneBase from the stem; TorchScript refuses module annotations
        stem: ConvDownsample

    def __init__(self, arch: str | dict = 'tiny', embed_dims: int | None = None,
                 depths: Sequence[int] | None = None, num_heads: Sequence[int] | None = None,
                 split_size: int | Sequence[int] | None = None, attn_type: str | None = None,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, kernel: str = 'identity', attn_impl: str = 'auto',
                 in_channels: int = 3, drop_rate: float = 0.0, attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.1, out_indices: Sequence[int] = (0, 1, 2, 3), out_norm: bool = True,
                 frozen_stages: int = -1, with_cp: bool = False) -> None:
        name = type(self).__name__
        settings = resolve_settings(
            name, self.arch_zoo, arch,
            dict(embed_dims=embed_dims, depths=depths, num_heads=num_heads, split_size=split_size, attn_type=attn_type),
            in_channels=in_channels, kernel=kernel, attn_impl=attn_impl, out_indices=out_indices, out_norm=out_norm,
            frozen_stages=frozen_stages, drop_path_rate=drop_path_rate,
            options=dict(mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                         with_cp=with_cp))
        dims, heads, n = settings.embed_dims, settings.num_heads, settings.num_stages
        splits = settings.arch['split_size']
        if isinstance(splits, int):  # one stripe width for every stage
            splits = settings.arch['split_size'] = (splits,) * n
        stem = ConvDownsample(in_channels, dims[0], 7, 4, 2)
        stages = []
        for i in range(n):
            merge = ConvDownsample(dims[i - 1], dims[i], 3, 2, 1) if i > 0 else None
            blocks = []
            for j, kind in enumerate(settings.attn_kinds[i]):
                attn = (inline_attention(settings, i, qkv_bias=qkv_bias, attn_drop=attn_drop_rate, proj_drop=drop_rate,
                                         lepe=True)
                        if kind == 'I' else
                        stripe_attention(dims[i], heads[i], splits[i], 1 if i == n - 1 else 2, qkv_bias,
                                         attn_drop_rate, drop_rate, f'{name} stage {i}'))
                blocks.append(transformer_block(settings, i, j, attn, mlp_ratio=mlp_ratio, norm_eps=1e-5,
                                                with_cp=with_cp, residual_from_input=True))
            stages.append(CSwinStage(merge, blocks))
        super().__init__(settings, dict(stem=stem), stages, strides=[4 * 2 ** i for i in range(n)])

    def embed_input(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[torch.Tensor, HW]:  # noqa: ARG002
        return self.stem(padding.pad_to_multiple(x, 4))  # a multiple of 4 first, so that the grid is ceil(H / 4)

    convert_pretrained = staticmethod(convert_authors_layout)
