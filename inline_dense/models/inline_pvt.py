"""InLine-PVT: Pyramid Vision Transformer whose InLine stages attend globally."""
import re
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from torch import nn

from .arch import check_out_indices, check_stage_lists, parse_attn_type, resolve_arch
from .backbone_base import InLineBackboneBase, valid_grid_sizes, valid_token_mask, zero_padding
from .inline_attention import KERNELS, InLineAttention, check_heads
from .layers import TransformerBlock, pad_to_multiple, run_blocks
from .sr_attention import SRAttention

HW = Tuple[int, int]


def resize_pos_embed(pos_embed: torch.Tensor, src_hw: HW, dst_hw: HW) -> torch.Tensor:
    """(1, h0*w0, C) embedding of a ``src_hw`` grid -> (1, h*w, C), bilinear, align_corners=False."""
    if tuple(src_hw) == tuple(dst_hw):
        return pos_embed
    c = pos_embed.shape[-1]
    grid = pos_embed.reshape(1, *src_hw, c).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=dst_hw, mode='bilinear', align_corners=False)
    return grid.flatten(2).transpose(1, 2)


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

    def embed(self, x: torch.Tensor, valid_hw: Optional[Sequence[HW]] = None,
              stride: int = 1) -> Tuple[torch.Tensor, HW]:
        """(B, C_in, H, W) -> tokens (B, N, C) with position embedding, and the grid size.

        ``valid_hw`` (real image sizes in pixels) and ``stride`` (this stage's, in pixels)
        place each padded image's embedding on its own grid, see ``position``."""
        x = self.patch_embed.proj(pad_to_multiple(x, self.patch))
        hw = (x.shape[2], x.shape[3])
        x = self.patch_embed.norm(x.flatten(2).transpose(1, 2))
        return self.pos_drop(x + self.position(hw, valid_grid_sizes(valid_hw, hw, stride))), hw

    def position(self, hw: HW, sizes: Optional[List[HW]] = None) -> torch.Tensor:
        """(1, h*w, C) embedding resized to the grid; with per-image grids ``sizes`` (padded
        batch), (B, h*w, C) with each image's embedding resized to its own grid at the top
        left, as it would be alone: padding must not move an image's positions."""
        if sizes is None:
            return resize_pos_embed(self.pos_embed, self.pos_hw, hw)
        c = self.pos_embed.shape[-1]
        pos = self.pos_embed.new_zeros(len(sizes), hw[0], hw[1], c)
        resized: Dict[HW, torch.Tensor] = {}
        for i, size in enumerate(sizes):
            if size not in resized:
                resized[size] = resize_pos_embed(self.pos_embed, self.pos_hw, size).view(*size, c)
            pos[i, :size[0], :size[1]] = resized[size]
        return pos.view(len(sizes), -1, c)


class InLinePVT(InLineBackboneBase):
    """InLine-PVT backbone (Han et al., NeurIPS 2024) for dense prediction.

    Args:
        arch: 'tiny', 'small', 'medium', 'large' or a dict with embed_dims/depths/
            num_heads/mlp_ratios.
        embed_dims, depths, num_heads, mlp_ratios: per-stage overrides.
        attn_type: one letter per stage, I (InLine, global) or S (softmax with spatial
            reduction ``sr_ratios``). Default 'IIII'.
        pretrain_img_size: input size of the position embeddings' grid (224).
        out_indices, out_norm, frozen_stages (k freezes the first k stages), with_cp,
        init_cfg: as in ``InLineSwin``.
    """

    name = 'InLinePVT'
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

    def __init__(self, arch: Union[str, dict] = 'tiny', embed_dims: Optional[Sequence[int]] = None,
                 depths: Optional[Sequence[int]] = None, num_heads: Optional[Sequence[int]] = None,
                 mlp_ratios: Optional[Sequence[float]] = None, attn_type: str = 'IIII',
                 sr_ratios: Sequence[int] = (8, 4, 2, 1), qkv_bias: bool = True, kernel: str = 'identity',
                 patch_sizes: Sequence[int] = (4, 2, 2, 2), in_channels: int = 3, pretrain_img_size: int = 224,
                 drop_rate: float = 0.0, attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1,
                 out_indices: Sequence[int] = (0, 1, 2, 3), out_norm: bool = True, frozen_stages: int = -1,
                 with_cp: bool = False, init_cfg: Optional[dict] = None) -> None:
        cfg = resolve_arch(arch, self.arch_zoo, self.name)
        for key, value in dict(embed_dims=embed_dims, depths=depths, num_heads=num_heads,
                               mlp_ratios=mlp_ratios).items():
            if value is not None:
                cfg[key] = value
        cfg = {k: tuple(v) for k, v in cfg.items()}
        n = len(cfg['depths'])
        check_stage_lists(dict(cfg, sr_ratios=sr_ratios, patch_sizes=patch_sizes), n, self.name)
        if kernel not in KERNELS:
            raise ValueError(f'{self.name}: unknown kernel {kernel!r}; use one of {sorted(KERNELS)}.')
        kinds = parse_attn_type(attn_type, cfg['depths'], self.name, allow_mixed=False)
        dims = cfg['embed_dims']
        for i, (d, h) in enumerate(zip(dims, cfg['num_heads'])):
            check_heads(d, h, f'{self.name} stage {i}')
        out_indices = check_out_indices(out_indices, n, self.name)
        super().__init__(in_channels, out_indices, out_norm, dims, frozen_stages, init_cfg)
        self.arch_settings = dict(cfg, attn_type=attn_type)
        self.out_indices = out_indices
        total_stride = 1
        for p in patch_sizes:
            total_stride *= p
        self.min_input_size = total_stride

        rates = torch.linspace(0, drop_path_rate, sum(cfg['depths'])).tolist()
        self.stages = nn.ModuleList()
        stride, in_dims = 1, in_channels
        for i in range(n):
            stride *= patch_sizes[i]
            blocks = []
            for _ in range(cfg['depths'][i]):
                if kinds[i][0] == 'I':
                    attn = InLineAttention(dims[i], cfg['num_heads'][i], qkv_bias, kernel, attn_drop_rate, drop_rate)
                else:
                    attn = SRAttention(dims[i], cfg['num_heads'][i], sr_ratios[i], qkv_bias,
                                       attn_drop_rate, drop_rate)
                blocks.append(TransformerBlock(dims[i], attn, cfg['mlp_ratios'][i], 1e-6, rates.pop(0), with_cp))
            pos_hw = (pretrain_img_size // stride, pretrain_img_size // stride)
            self.stages.append(PVTStage(in_dims, dims[i], patch_sizes[i], pos_hw, blocks, drop_rate))
            in_dims = dims[i]
        self.strides = [int(s) for s in torch.tensor(patch_sizes).cumprod(0)]
        self._freeze()

    def _init_from_scratch(self) -> None:
        super()._init_from_scratch()
        for stage in self.stages:
            nn.init.trunc_normal_(stage.pos_embed, std=0.02)

    def _frozen_modules(self) -> List[nn.Module]:
        mods: List[nn.Module] = []
        for i in range(max(self.frozen_stages, 0)):
            mods.append(self.stages[i])
            if str(i) in self.out_norms:
                mods.append(self.out_norms[str(i)])
        return mods

    def forward(self, x: torch.Tensor, valid_hw: Optional[Sequence[HW]] = None) -> Tuple[torch.Tensor, ...]:
        """(B, 3, H, W) -> tuple of (B, C_i, H_i, W_i) for out_indices (strides 4, 8, 16, 32).

        ``valid_hw``: per image, its real (unpadded) size in pixels, see ``InLineSwin``.
        """
        self.check_input(x, valid_hw)
        outs = []
        for i, stage in enumerate(self.stages):
            tokens, hw = stage.embed(x, valid_hw, self.strides[i])
            mask = valid_token_mask(valid_hw, hw, self.strides[i], x.device)
            tokens = zero_padding(run_blocks(stage.blocks, tokens, hw, mask), mask)
            x = tokens.transpose(1, 2).reshape(tokens.shape[0], -1, *hw)
            if i in self.out_indices:
                outs.append(self.output(i, tokens, hw))
        return tuple(outs)

    @staticmethod
    def convert_pretrained(state_dict: Dict[str, torch.Tensor]) -> Tuple[Dict[str, torch.Tensor], List[str]]:
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
