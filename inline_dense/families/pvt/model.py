"""InLine-PVT: Pyramid Vision Transformer whose InLine stages attend globally."""
import math
from collections.abc import Sequence

import torch
from torch import nn

from ...layers import fused, padding, position
from ...layers.arch import check_multiple_of, to_2tuple_size
from ...layers.backbone import InLineBackboneBase
from ...layers.block import TransformerBlock, inline_attention, transformer_block
from ...layers.settings import resolve_settings
from ...layers.tensor_utils import channels_last, tokens_to_map
from ...typing import HW
from .convert import convert_authors_layout
from .spec import SPEC
from .sr_attention import SRAttention


class PVTStage(nn.Module):
    """Conv patch embedding + LayerNorm, learned position embedding, blocks."""

    def __init__(self, in_dims: int, dims: int, patch: int, pos_hw: HW, blocks: list[TransformerBlock],
                 drop_rate: float) -> None:
        super().__init__()
        self.patch = patch
        self.pos_hw = pos_hw
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(in_dims, dims, patch, stride=patch)
        self.patch_embed.norm = nn.LayerNorm(dims, eps=1e-5)
        self.pos_embed = nn.Parameter(torch.zeros(1, pos_hw[0] * pos_hw[1], dims))
        self.pos_drop = nn.Dropout(drop_rate)
        self.blocks = nn.ModuleList(blocks)

    def leave(self, x: torch.Tensor, hw: HW) -> tuple[torch.Tensor, HW]:
        """Tokens (B, N, C) -> the map (B, C, H, W) the next stage's patch embedding takes."""
        return tokens_to_map(x, hw), hw

    def enter(self, x: torch.Tensor, hw: HW, valid_hw: list[HW] | None, stride: int) -> tuple[torch.Tensor, HW]:  # noqa: ARG002
        """The map (B, C_in, H, W) (the image, or the previous stage's) -> tokens, grid (``embed``)."""
        return self.embed(x, valid_hw, stride)

    def embed(self, x: torch.Tensor, valid_hw: list[HW] | None = None,
              stride: int = 1) -> tuple[torch.Tensor, HW]:
        """(B, C_in, H, W) -> tokens (B, N, C) with position embedding, and the grid size.

        ``valid_hw`` (real image sizes in pixels) and ``stride`` (this stage's, in pixels)
        place each padded image's embedding on its own grid, see ``position``."""
        x = padding.pad_to_multiple(x, self.patch)
        x = self.patch_embed.proj(channels_last(x) if torch.jit.is_scripting() else fused.conv_input(x))  # type: ignore[operator]
        hw = (x.shape[2], x.shape[3])
        x = self.patch_embed.norm(x.flatten(2).transpose(1, 2))  # type: ignore[operator]
        pos = position.stage_position(self.pos_embed, self.pos_hw, hw, valid_hw, stride)
        if not torch.jit.is_scripting():  # eager bfloat16 inference: tokens stay bfloat16 (fused.in_token_dtype)
            pos = fused.in_token_dtype(pos, x)
        return self.pos_drop(x + pos), hw


class InLinePVT(InLineBackboneBase):
    """InLine-PVT backbone (Han et al., NeurIPS 2024) for dense prediction.

    Args:
        arch: 'tiny', 'small', 'medium', 'large' or a dict with embed_dims/depths/
            num_heads/mlp_ratios.
        embed_dims, depths, num_heads, mlp_ratios: per-stage overrides.
        attn_type: one letter per stage, I (InLine, global) or S (softmax with spatial
            reduction ``sr_ratios``). Default 'IIII'.
        pretrain_img_size: input size of the position embeddings' grid: an int or an
            (h, w) / (s,) tuple (224).
            A positive multiple of the total stride (the product of ``patch_sizes``), so that
            every stage's grid is a whole number of patches.
        kernel, attn_impl, out_indices, out_norm, frozen_stages (k freezes the first k stages),
        with_cp: as in ``InLineSwin``.
    """

    arch_zoo = SPEC.presets

    trunc_normal_parameters = ('pos_embed',)

    def __init__(self, arch: str | dict = 'tiny', embed_dims: Sequence[int] | None = None,
                 depths: Sequence[int] | None = None, num_heads: Sequence[int] | None = None,
                 mlp_ratios: Sequence[float] | None = None, attn_type: str = 'IIII',
                 sr_ratios: Sequence[int] = (8, 4, 2, 1), qkv_bias: bool = True, kernel: str = 'identity',
                 attn_impl: str = 'auto', patch_sizes: Sequence[int] = (4, 2, 2, 2), in_channels: int = 3,
                 pretrain_img_size: int | Sequence[int] = 224, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1, out_indices: Sequence[int] = (0, 1, 2, 3),
                 out_norm: bool = True, frozen_stages: int = -1, with_cp: bool = False) -> None:
        name = type(self).__name__
        settings = resolve_settings(
            name, self.arch_zoo, arch,
            dict(embed_dims=embed_dims, depths=depths, num_heads=num_heads, mlp_ratios=mlp_ratios, attn_type=attn_type),
            in_channels=in_channels, kernel=kernel, attn_impl=attn_impl, out_indices=out_indices, out_norm=out_norm,
            frozen_stages=frozen_stages, drop_path_rate=drop_path_rate,
            stage_lists=dict(sr_ratios=sr_ratios, patch_sizes=patch_sizes),
            options=dict(sr_ratios=sr_ratios, qkv_bias=qkv_bias, patch_sizes=patch_sizes, drop_rate=drop_rate,
                         attn_drop_rate=attn_drop_rate, with_cp=with_cp))
        dims, heads, mlp_ratios = settings.embed_dims, settings.num_heads, settings.arch['mlp_ratios']
        pretrain_hw = to_2tuple_size(pretrain_img_size, 'pretrain_img_size', name)
        strides = [math.prod(patch_sizes[:i + 1]) for i in range(settings.num_stages)]
        check_multiple_of(pretrain_hw, strides[-1], 'pretrain_img_size', name,
                          f'the product of patch_sizes {tuple(patch_sizes)}: each stage\'s position grid is whole')
        in_dims, stages = in_channels, []
        for i in range(settings.num_stages):
            blocks = []
            for j, kind in enumerate(settings.attn_kinds[i]):
                attn = (inline_attention(settings, i, qkv_bias=qkv_bias, attn_drop=attn_drop_rate, proj_drop=drop_rate)
                        if kind == 'I' else
                        SRAttention(dims[i], heads[i], sr_ratios[i], qkv_bias, attn_drop_rate, drop_rate))
                blocks.append(transformer_block(settings, i, j, attn, mlp_ratio=mlp_ratios[i], norm_eps=1e-6,
                                                with_cp=with_cp))
            pos_hw = (pretrain_hw[0] // strides[i], pretrain_hw[1] // strides[i])
            stages.append(PVTStage(in_dims, dims[i], patch_sizes[i], pos_hw, blocks, drop_rate))
            in_dims = dims[i]
        super().__init__(settings, {}, stages, strides)  # no stem: each stage embeds its input

    def embed_input(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[torch.Tensor, HW]:  # noqa: ARG002
        return x, (x.shape[2], x.shape[3])  # each stage embeds its own input

    convert_pretrained = staticmethod(convert_authors_layout)
