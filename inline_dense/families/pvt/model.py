"""InLine-PVT: Pyramid Vision Transformer whose InLine stages attend globally."""
import math
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from ...layers.arch import check_multiple_of, to_2tuple_size
from ...layers.backbone import InLineBackboneBase, valid_grid_sizes
from ...layers.block import TransformerBlock, inline_attention, pad_to_multiple, transformer_block
from ...layers.settings import resolve_settings
from ...typing import HW, StateDict
from .sr_attention import SRAttention


def resize_pos_grid(pos_embed: torch.Tensor, src_hw: HW, dst_hw: HW) -> torch.Tensor:
    """(1, h0*w0, C) embedding of a ``src_hw`` grid -> (1, C, h, w) map, bilinear, align_corners=False."""
    c = pos_embed.shape[-1]
    grid = pos_embed.reshape(1, *src_hw, c).permute(0, 3, 1, 2)
    return F.interpolate(grid, size=dst_hw, mode='bilinear', align_corners=False)


def resize_pos_embed(pos_embed: torch.Tensor, src_hw: HW, dst_hw: HW) -> torch.Tensor:
    """(1, h0*w0, C) embedding of a ``src_hw`` grid -> (1, h*w, C), bilinear, align_corners=False."""
    if tuple(src_hw) == tuple(dst_hw):
        return pos_embed
    return resize_pos_grid(pos_embed, src_hw, dst_hw).flatten(2).transpose(1, 2)


class PVTStage(nn.Module):
    """Conv patch embedding + LayerNorm, learned position embedding, blocks."""

    def __init__(self, in_dims: int, dims: int, patch: int, pos_hw: HW, blocks: List[TransformerBlock],
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

    def leave(self, x: torch.Tensor, hw: HW) -> Tuple[torch.Tensor, HW]:
        """Tokens (B, N, C) -> the map (B, C, H, W) the next stage's patch embedding takes."""
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], hw[0], hw[1]), hw

    def enter(self, x: torch.Tensor, hw: HW, valid_hw: Optional[List[HW]], stride: int) -> Tuple[torch.Tensor, HW]:
        """The map (B, C_in, H, W) (the image, or the previous stage's) -> tokens, grid (``embed``)."""
        return self.embed(x, valid_hw, stride)

    def embed(self, x: torch.Tensor, valid_hw: Optional[List[HW]] = None,
              stride: int = 1) -> Tuple[torch.Tensor, HW]:
        """(B, C_in, H, W) -> tokens (B, N, C) with position embedding, and the grid size.

        ``valid_hw`` (real image sizes in pixels) and ``stride`` (this stage's, in pixels)
        place each padded image's embedding on its own grid, see ``position``."""
        x = self.patch_embed.proj(pad_to_multiple(x, self.patch))  # type: ignore[operator]
        hw = (x.shape[2], x.shape[3])
        x = self.patch_embed.norm(x.flatten(2).transpose(1, 2))  # type: ignore[operator]
        return self.pos_drop(x + stage_position(self.pos_embed, self.pos_hw, hw, valid_hw, stride)), hw


def stage_position(pos_embed: torch.Tensor, pos_hw: HW, hw: HW, valid_hw: Optional[List[HW]],
                   stride: int) -> torch.Tensor:
    """The (1, h0*w0, C) embedding of the ``pos_hw`` grid resized to the ``hw`` grid: (1, h*w, C);
    for a padded batch (``valid_hw``, real image sizes in pixels, at this ``stride``), (B, h*w, C)
    with each image's embedding resized to its own grid at the top left, as it would be alone:
    padding must not move an image's positions."""
    sizes = valid_grid_sizes(valid_hw, hw, stride)
    if sizes is None:
        return resize_pos_embed(pos_embed, pos_hw, hw)
    c = pos_embed.shape[-1]
    pos = pos_embed.new_zeros(len(sizes), hw[0], hw[1], c)
    resized: Dict[str, torch.Tensor] = {}  # by 'h,w' (TorchScript keys no tuples)
    for i, size in enumerate(sizes):
        key = f'{size[0]},{size[1]}'
        if key not in resized:  # (h_i, w_i, C); no flatten and view back: traced, each costs seconds
            resized[key] = resize_pos_grid(pos_embed, pos_hw, size)[0].permute(1, 2, 0)
        pos[i, :size[0], :size[1]] = resized[key]
    return pos.view(len(sizes), hw[0] * hw[1], c)


# kept as calls by symbolic tracing: they branch on sizes and valid_hw (run-time values there)
torch.fx.wrap('stage_position')
torch.fx.wrap('pad_to_multiple')


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

    arch_zoo = {
        'tiny': dict(embed_dims=(64, 128, 320, 512), depths=(2, 2, 2, 2), num_heads=(2, 4, 10, 16),
                     mlp_ratios=(8, 8, 4, 4)),
        'small': dict(embed_dims=(64, 128, 320, 512), depths=(3, 4, 6, 3), num_heads=(2, 4, 10, 16),
                      mlp_ratios=(8, 8, 4, 4)),
        'medium': dict(embed_dims=(64, 128, 320, 512), depths=(3, 4, 18, 3), num_heads=(2, 4, 10, 16),
                       mlp_ratios=(8, 8, 4, 4)),
        'large': dict(embed_dims=(64, 128, 320, 512), depths=(3, 8, 27, 3), num_heads=(2, 4, 10, 16),
                      mlp_ratios=(8, 8, 4, 4)),
    }

    trunc_normal_parameters = ('pos_embed',)

    def __init__(self, arch: Union[str, dict] = 'tiny', embed_dims: Optional[Sequence[int]] = None,
                 depths: Optional[Sequence[int]] = None, num_heads: Optional[Sequence[int]] = None,
                 mlp_ratios: Optional[Sequence[float]] = None, attn_type: str = 'IIII',
                 sr_ratios: Sequence[int] = (8, 4, 2, 1), qkv_bias: bool = True, kernel: str = 'identity',
                 attn_impl: str = 'auto', patch_sizes: Sequence[int] = (4, 2, 2, 2), in_channels: int = 3,
                 pretrain_img_size: Union[int, Sequence[int]] = 224, drop_rate: float = 0.0,
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

    def embed_input(self, x: torch.Tensor, valid_hw: Optional[List[HW]]) -> Tuple[torch.Tensor, HW]:
        return x, (x.shape[2], x.shape[3])  # each stage embeds its own input

    @staticmethod
    def convert_pretrained(state_dict: StateDict) -> Tuple[StateDict, List[str]]:
        """Authors' InLine-PVT keys -> ours. Pure function of the state dict.

        ``patch_embed{s}`` / ``pos_embed{s}`` / ``block{s}.j`` -> ``stages.{s-1}.…``; in InLine
        blocks (those with ``attn.residual``) ``attn.q`` and ``attn.kv`` are fused into
        ``attn.qkv`` (q | k | v); drops ``head`` and a final ``norm`` if present.
        """
        inline_blocks = {k.split('.attn.')[0] for k in state_dict if '.attn.residual.' in k}
        out, dropped = {}, []
        for key, value in state_dict.items():
            if key.startswith(('head.', 'norm.', 'cls_token')):
                dropped.append(key)
                continue
            m = re.match(r'^(patch_embed|pos_embed|block)(\d)(.*)$', key)
            new = key
            if m:
                part = {'block': 'blocks', 'patch_embed': 'patch_embed', 'pos_embed': 'pos_embed'}[m.group(1)]
                new = f'stages.{int(m.group(2)) - 1}.{part}{m.group(3)}'
            prefix = key.split('.attn.')[0]
            if prefix in inline_blocks and re.search(r'\.attn\.(q|kv)\.(weight|bias)$', key):
                new_prefix = new.split('.attn.')[0]
                suffix = key.rsplit('.', 1)[1]
                if f'{new_prefix}.attn.qkv.{suffix}' not in out and f'{prefix}.attn.q.{suffix}' in state_dict:
                    out[f'{new_prefix}.attn.qkv.{suffix}'] = torch.cat(
                        [state_dict[f'{prefix}.attn.q.{suffix}'], state_dict[f'{prefix}.attn.kv.{suffix}']], 0)
                continue
            out[new] = value
        return out, dropped
