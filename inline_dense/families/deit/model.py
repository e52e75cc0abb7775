"""InLine-DeiT: a plain ViT whose every block attends globally with InLine attention."""
import logging
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from ...layers import fused, padding, position
from ...layers.arch import check_backbone_options, check_multiple_of, resolve_arch, to_2tuple_size
from ...layers.backbone import InLineBackboneBase
from ...layers.block import TransformerBlock, transformer_block
from ...layers.inline_attention import InLineAttention
from ...layers.settings import resolve_settings
from ...layers.tensor_utils import channels_last, check_heads
from ...typing import HW, StateDict
from .convert import convert_authors_layout
from .spec import SPEC

log = logging.getLogger(__name__)


class DeiTEmbed(nn.Module):
    """The stem: patch embedding, cls token, position embedding, dropout.

    The image (B, C_in, H, W) is padded to multiples of ``patch``, embedded by a ``patch`` x ``patch``
    conv with stride ``patch``; the position embedding (1, 1 + h0*w0, C) of the ``pos_hw`` training
    grid (cls entry first) has its grid part resampled to the input's grid (bicubic, as timm's ViTs;
    in a padded batch to each image's own grid); the cls token (plus its entry) goes first.
    Returns tokens (B, P + h*w, C), P = 1 with the cls token else 0, and the grid (h, w).
    """

    def __init__(self, in_channels: int, dims: int, patch: int, pos_hw: HW, with_cls_token: bool,
                 drop_rate: float) -> None:
        super().__init__()
        self.patch = patch
        self.pos_hw = pos_hw
        self.with_cls_token = with_cls_token
        self.proj = nn.Conv2d(in_channels, dims, patch, stride=patch)
        # kept without the token too (checkpoints load strictly), but out of training: DDP refuses a
        # trainable parameter that takes no part in the loss
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dims), requires_grad=with_cls_token)
        self.pos_embed = nn.Parameter(torch.zeros(1, 1 + pos_hw[0] * pos_hw[1], dims))
        self.drop = nn.Dropout(drop_rate)

    def forward(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[torch.Tensor, HW]:
        x = padding.pad_to_multiple(x, self.patch)
        x = self.proj(channels_last(x) if torch.jit.is_scripting() else fused.conv_input(x))
        hw = (x.shape[2], x.shape[3])
        # token-major once here: the blocks' adds keep their input's layout, and every LayerNorm would copy
        tokens = x.flatten(2).transpose(1, 2).contiguous()
        pos = position.stage_position(self.pos_embed[:, 1:], self.pos_hw, hw, valid_hw, self.patch, 'bicubic')
        if not torch.jit.is_scripting():  # eager bfloat16 inference: tokens stay bfloat16 (fused.in_token_dtype)
            pos = fused.in_token_dtype(pos, tokens)
        tokens = tokens + pos
        if self.with_cls_token:
            cls = (self.cls_token + self.pos_embed[:, :1]).expand(tokens.shape[0], -1, -1)
            if not torch.jit.is_scripting():
                cls = fused.in_token_dtype(cls, tokens)
            tokens = torch.cat([cls, tokens], 1)
        return self.drop(tokens), hw


class DeiTBlock(nn.Module):
    """One block as a stage of the backbone's loop (``out_indices`` and ``frozen_stages`` count blocks):
    tokens (B, P + h*w, C) in and out, the grid unchanged."""

    def __init__(self, block: TransformerBlock) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([block])

    def enter(self, x: torch.Tensor, hw: HW, valid_hw: list[HW] | None, stride: int) -> tuple[torch.Tensor, HW]:  # noqa: ARG002
        return x, hw

    def leave(self, x: torch.Tensor, hw: HW) -> tuple[torch.Tensor, HW]:
        return x, hw


class InLineDeiT(InLineBackboneBase):
    """InLine-DeiT backbone (Han et al., NeurIPS 2024) for dense prediction: a plain ViT whose every
    block is global InLine attention, at any input size.

    Args:
        arch: 'tiny', 'small', 'base' or a dict with embed_dims/depth/num_heads/pretrain_img_size.
        embed_dims, depth, num_heads: override the arch's (one width and head count for all blocks).
        pretrain_img_size: the input size the position embedding's grid was trained at (an int or
            (h, w), a multiple of ``patch_size``; the preset's: T 224, S 288, B 448). Other inputs
            resample the grid (bicubic, as timm's ViTs).
        patch_size, mlp_ratio, qkv_bias: the authors' 16, 4, True.
        with_cls_token: prepend the cls token (the authors' model does; False leaves it out of the
            blocks, as mmseg's ViT option of that name).
        kernel, attn_impl, drop_rate, attn_drop_rate, drop_path_rate, with_cp: as in ``InLineSwin``.
        out_indices: blocks whose outputs are returned (mmseg's ViT convention), each
            (B, C, ceil(H/16), ceil(W/16)); by default the last.
        out_norm: a LayerNorm (eps 1e-6, the authors' final norm's) on every returned output.
        frozen_stages: -1 none; 0 the stem (patch and position embeddings, cls token); k also the
            first k blocks.

    Weights are initialised at construction; the authors' ImageNet weights load with
    ``inline_dense.checkpoint.load_pretrained(model, 'inline://inline_deit_t')`` (``_s``, ``_b``).
    """

    arch_zoo = SPEC.presets

    trunc_normal_parameters = ('pos_embed', 'cls_token')

    if TYPE_CHECKING:  # set by InLineBackboneBase from the stem; TorchScript refuses module annotations
        patch_embed: DeiTEmbed

    def __init__(self, arch: str | dict = 'tiny', embed_dims: int | None = None,
                 depth: int | None = None, num_heads: int | None = None,
                 pretrain_img_size: int | Sequence[int] | None = None, patch_size: int = 16,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, with_cls_token: bool = True,
                 kernel: str = 'identity', attn_impl: str = 'auto', in_channels: int = 3, drop_rate: float = 0.0,
                 attn_drop_rate: float = 0.0, drop_path_rate: float = 0.1, out_indices: Sequence[int] = (-1,),
                 out_norm: bool = True, frozen_stages: int = -1, with_cp: bool = False) -> None:
        name = type(self).__name__
        check_backbone_options(dict(with_cls_token=with_cls_token, patch_size=patch_size, mlp_ratio=mlp_ratio), name)
        cfg = resolve_arch(arch, self.arch_zoo, name, dict(embed_dims=embed_dims, depth=depth, num_heads=num_heads,
                                                           pretrain_img_size=pretrain_img_size))
        check_backbone_options({k: cfg[k] for k in ('embed_dims', 'depth')}, name)
        dims, blocks, heads = cfg['embed_dims'], cfg['depth'], cfg['num_heads']
        if not isinstance(heads, int) or isinstance(heads, bool) or heads <= 0:
            raise TypeError(f'{name}: num_heads={heads!r} must be a positive int (every block has as many), '
                            f'e.g. num_heads=6.')
        check_heads(dims, heads, name)
        pos_img = to_2tuple_size(cfg['pretrain_img_size'], 'pretrain_img_size', name)
        check_multiple_of(pos_img, patch_size, 'pretrain_img_size', name,
                          'the position embedding is one entry per patch of the training input')
        if isinstance(out_indices, Sequence) and not isinstance(out_indices, str):  # -1: the last block
            ints = [i for i in out_indices if isinstance(i, int) and not isinstance(i, bool)]
            if any(i < -blocks for i in ints):  # named as written, not as shifted
                raise ValueError(f'{name}: out_indices {tuple(out_indices)} must be block indices in '
                                 f'[-{blocks}, {blocks - 1}] (this model has {blocks} blocks; -1 is the last).')
            out_indices = [i + blocks if isinstance(i, int) and not isinstance(i, bool) and i < 0 else i
                           for i in out_indices]
        # a block per stage: the shared checks and the stage loop count blocks
        settings = resolve_settings(
            name, {'blocks': dict(embed_dims=(dims,) * blocks, depths=(1,) * blocks, num_heads=(heads,) * blocks)},
            'blocks', {}, in_channels=in_channels, kernel=kernel, attn_impl=attn_impl, out_indices=out_indices,
            out_norm=out_norm, frozen_stages=frozen_stages, drop_path_rate=drop_path_rate,
            options=dict(qkv_bias=qkv_bias, drop_rate=drop_rate, attn_drop_rate=attn_drop_rate, with_cp=with_cp))
        prefix = 1 if with_cls_token else 0
        stem = dict(patch_embed=DeiTEmbed(in_channels, dims, patch_size,
                                          (pos_img[0] // patch_size, pos_img[1] // patch_size), with_cls_token,
                                          drop_rate))
        stages = []
        for i in range(blocks):
            attn = InLineAttention(dims, heads, qkv_bias, kernel, attn_drop_rate, drop_rate, impl=attn_impl,
                                   num_prefix_tokens=prefix)
            stages.append(DeiTBlock(transformer_block(settings, i, 0, attn, mlp_ratio=mlp_ratio, norm_eps=1e-6,
                                                      with_cp=with_cp)))
        super().__init__(settings, stem, stages, [patch_size] * blocks, num_prefix_tokens=prefix, out_norm_eps=1e-6)
        self.arch = dict(cfg, pretrain_img_size=pos_img)
        self.depth = blocks
        self.patch_size = patch_size
        self.with_cls_token = with_cls_token

    @property
    def min_input_size(self) -> int:
        return self.patch_size

    def embed_input(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[torch.Tensor, HW]:
        return self.patch_embed(x, valid_hw)

    convert_pretrained = staticmethod(convert_authors_layout)

    def adapt_pretrained(self, state: StateDict, prefix: str = '') -> StateDict:
        """Converted weights (this model's keys, after ``prefix``) fitted to this model's settings: a
        position embedding ``patch_embed.pos_embed`` (1, 1 + h0*w0, C) of another grid than
        ``pretrain_img_size`` gives (a checkpoint trained at another resolution) is resampled to it,
        bicubic and antialiased as timm's ``resample_abs_pos_embed`` (mmseg's ViT also resamples on
        load), with one log line. The checkpoint's grid is taken square (timm's assumption); one that
        is not, or of another width, is left to the strict loader to refuse."""
        key = f'{prefix}patch_embed.pos_embed'
        pos = state.get(key)
        ours = self.patch_embed.pos_embed
        if pos is None or pos.ndim != 3 or pos.shape[0] != 1 or pos.shape[2] != ours.shape[2] \
                or pos.shape[1] == ours.shape[1]:
            return state
        side = math.isqrt(pos.shape[1] - 1)
        if side * side != pos.shape[1] - 1:
            return state
        grid = self.patch_embed.pos_hw
        resized = position.resize_pos_embed(pos[:, 1:], (side, side), grid, 'bicubic')
        log.info(f'{type(self).__name__}: resampled the checkpoint\'s position embedding from a {side}x{side} grid '
                 f'(trained at {side * self.patch_size} px) to this model\'s {grid[0]}x{grid[1]} (pretrain_img_size '
                 f'{grid[0] * self.patch_size}x{grid[1] * self.patch_size}), bicubic, as timm and mmseg do on load')
        return {**state, key: torch.cat([pos[:, :1], resized.to(pos.dtype)], 1)}
