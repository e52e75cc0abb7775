"""InLine-Swin: Swin Transformer whose InLine blocks attend globally."""
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from ...layers import fused, padding
from ...layers.backbone import InLineBackboneBase
from ...layers.block import TransformerBlock, inline_attention, transformer_block
from ...layers.settings import resolve_settings
from ...layers.tensor_utils import channels_last, traced
from ...layers.tracing import fx_wrap
from ...typing import HW
from .convert import convert_authors_layout
from .spec import SPEC
from .window_attention import ShiftWindowMSA


class PatchEmbed(nn.Module):
    """Non-overlapping ``patch`` x ``patch`` conv, then LayerNorm: the image (B, C_in, H, W), H and W
    multiples of ``patch`` -> tokens (B, H/patch * W/patch, C) and their grid (H/patch, W/patch)."""

    def __init__(self, in_channels: int, dims: int, patch: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, dims, patch, stride=patch)
        self.norm = nn.LayerNorm(dims)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, HW]:
        x = self.proj(channels_last(x) if torch.jit.is_scripting() else fused.conv_input(x))
        return self.norm(x.flatten(2).transpose(1, 2)), (x.shape[2], x.shape[3])


class PatchMerging(nn.Module):
    """2x2 neighbour concat -> LayerNorm(4C) -> Linear(4C, 2C). Odd grids are zero-padded.

    (B, H*W, C), (H, W) -> (B, ceil(H/2)*ceil(W/2), 2C), (ceil(H/2), ceil(W/2)).
    """

    def __init__(self, in_dims: int, out_dims: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * in_dims)
        self.reduction = nn.Linear(4 * in_dims, out_dims, bias=False)

    def forward(self, x: torch.Tensor, hw_shape: HW) -> tuple[torch.Tensor, HW]:
        b, _, c = x.shape
        h, w = hw_shape
        grid = pad_grid_to_even(x.view(b, h, w, c))
        # neighbour order (row, col): (0,0), (1,0), (0,1), (1,1), as the authors' checkpoints expect
        grid = torch.cat([grid[:, 0::2, 0::2], grid[:, 1::2, 0::2], grid[:, 0::2, 1::2], grid[:, 1::2, 1::2]], -1)
        out_hw = (grid.shape[1], grid.shape[2])
        return self.reduction(self.norm(grid.flatten(1, 2))), out_hw


@fx_wrap  # kept as a call by symbolic tracing: it branches on the size
def pad_grid_to_even(grid: torch.Tensor) -> torch.Tensor:
    """(B, H, W, C) zero-padded bottom/right to even H and W."""
    h, w = grid.shape[1], grid.shape[2]
    if traced() or h % 2 or w % 2:  # traced: no branch on the size
        grid = F.pad(grid, (0, 0, 0, padding.padding_to_multiple(w, 2), 0, padding.padding_to_multiple(h, 2)))
    return grid


class SwinStage(nn.Module):
    """A stage's blocks, then (but the last stage) the patch merging into the next."""

    def __init__(self, blocks: list[TransformerBlock], downsample: PatchMerging | None) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.downsample = downsample

    def enter(self, x: torch.Tensor, hw: HW, valid_hw: list[HW] | None, stride: int) -> tuple[torch.Tensor, HW]:  # noqa: ARG002
        """Tokens (B, N, C) of grid ``hw``, unchanged: the previous stage merged them."""
        return x, hw

    def leave(self, x: torch.Tensor, hw: HW) -> tuple[torch.Tensor, HW]:
        """(B, N, C), padding zeroed -> the next stage's tokens and grid (patch merging)."""
        if self.downsample is None:
            return x, hw
        return self.downsample(x, hw)


class InLineSwin(InLineBackboneBase):
    """InLine-Swin backbone (Han et al., NeurIPS 2024) for dense prediction.

    InLine blocks attend over the whole feature map (one global window) at any
    resolution; softmax blocks use ``window_size`` windows, shifted on odd blocks.

    Args:
        arch: 'tiny', 'small', 'base' or a dict with embed_dims/depths/num_heads/attn_type.
        embed_dims, depths, num_heads, attn_type: override the arch's values.
            attn_type has one letter per stage: I (InLine), S (softmax), M<k> (k InLine
            blocks then softmax), e.g. 'IIMS2'.
        window_size: window of the softmax blocks.
        kernel: phi of InLine attention ('identity', 'relu', 'leakyrelu', 'exp').
        attn_impl: evaluation of InLine attention (``InLineAttention``'s ``impl``; 'auto' is fastest).
        out_indices: stages whose outputs are returned, as (B, C_i, H/2^(i+2), W/2^(i+2)).
        out_norm: LayerNorm on every returned stage output.
        frozen_stages: -1 none; 0 the patch embedding; k also the first k stages.
        with_cp: activation checkpointing in every block.

    Weights are initialised at construction; the authors' ImageNet weights load with
    ``inline_dense.checkpoint.load_pretrained(model, 'inline://<variant>')``, a Swin variant of
    ``inline_dense.variants`` (a path or URL works too).
    """

    arch_zoo = SPEC.presets

    if TYPE_CHECKING:  # set by InLineBackboneBase from the stem; TorchScript refuses module annotations
        patch_embed: PatchEmbed
        drop_after_pos: nn.Dropout

    def __init__(self, arch: str | dict = 'tiny', embed_dims: int | None = None,
                 depths: Sequence[int] | None = None, num_heads: Sequence[int] | None = None,
                 attn_type: str | None = None, window_size: int = 7, mlp_ratio: float = 4.0,
                 qkv_bias: bool = True, kernel: str = 'identity', attn_impl: str = 'auto', patch_size: int = 4,
                 in_channels: int = 3, drop_rate: float = 0.0, attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.1, out_indices: Sequence[int] = (0, 1, 2, 3),
                 out_norm: bool = True, frozen_stages: int = -1, with_cp: bool = False) -> None:
        settings = resolve_settings(
            type(self).__name__, self.arch_zoo, arch,
            dict(embed_dims=embed_dims, depths=depths, num_heads=num_heads, attn_type=attn_type),
            in_channels=in_channels, kernel=kernel, attn_impl=attn_impl, out_indices=out_indices, out_norm=out_norm,
            frozen_stages=frozen_stages, drop_path_rate=drop_path_rate, allow_mixed=True,
            options=dict(window_size=window_size, mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, patch_size=patch_size,
                         drop_rate=drop_rate, attn_drop_rate=attn_drop_rate, with_cp=with_cp))
        dims, heads, n = settings.embed_dims, settings.num_heads, settings.num_stages
        # the dropout is stem too: a frozen stem's output must not change between calls
        stem = dict(patch_embed=PatchEmbed(in_channels, dims[0], patch_size), drop_after_pos=nn.Dropout(drop_rate))
        stages = []
        for i in range(n):
            blocks = []  # each attention made just before its block: the bias tables keep the draws they get here
            for j, kind in enumerate(settings.attn_kinds[i]):
                attn = (inline_attention(settings, i, qkv_bias=qkv_bias, attn_drop=attn_drop_rate, proj_drop=drop_rate)
                        if kind == 'I' else
                        ShiftWindowMSA(dims[i], heads[i], window_size, shift=j % 2 == 1, qkv_bias=qkv_bias,
                                       attn_drop=attn_drop_rate, proj_drop=drop_rate))
                blocks.append(transformer_block(settings, i, j, attn, mlp_ratio=mlp_ratio, norm_eps=1e-5,
                                                with_cp=with_cp))
            stages.append(SwinStage(blocks, PatchMerging(dims[i], dims[i + 1]) if i + 1 < n else None))
        super().__init__(settings, stem, stages, strides=[patch_size * 2 ** i for i in range(n)])
        self.patch_size = patch_size

    def embed_input(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[torch.Tensor, HW]:  # noqa: ARG002
        tokens, hw = self.patch_embed(padding.pad_to_multiple(x, self.patch_size))
        return self.drop_after_pos(tokens), hw

    convert_pretrained = staticmethod(convert_authors_layout)
