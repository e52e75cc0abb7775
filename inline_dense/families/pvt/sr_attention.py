"""Softmax attention with spatial reduction of keys/values (PVT's 'S' stages)."""

import torch
import torch.nn.functional as F
from torch import nn

from ...layers import fused
from ...layers.tensor_utils import check_heads, tokens_to_map
from ...layers.tracing import fx_leaf
from ...typing import HW


@fx_leaf
class SRAttention(nn.Module):
    """Global softmax attention whose keys/values come from a grid reduced by ``sr_ratio``
    (strided conv + LayerNorm), as in PVT.

    ``x`` (B, N, C) tokens of ``hw_shape``; ``valid_mask`` (B, N) bool of real tokens:
    padded keys are ignored (see ``reduced_valid_mask``), so that an image's output in a padded
    batch is what it is alone, at any grid size. Output (B, N, C).
    """

    def __init__(self, embed_dims: int, num_heads: int, sr_ratio: int = 1, qkv_bias: bool = True,
                 attn_drop: float = 0.0, proj_drop: float = 0.0) -> None:
        super().__init__()
        self.head_dim = check_heads(embed_dims, num_heads, 'SRAttention')
        self.num_heads = num_heads
        self.sr_ratio = sr_ratio
        self.q = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.kv = nn.Linear(embed_dims, embed_dims * 2, bias=qkv_bias)
        self.sr: nn.Conv2d | None = None  # sr_ratio 1: keys from the tokens themselves
        self.norm: nn.LayerNorm | None = None
        if sr_ratio > 1:
            self.sr = nn.Conv2d(embed_dims, embed_dims, sr_ratio, stride=sr_ratio)
            self.norm = nn.LayerNorm(embed_dims)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None = None,
                residual_input: torch.Tensor | None = None) -> torch.Tensor:  # noqa: ARG002
        """(B, N, C) -> (B, N, C); ``residual_input`` is not used (the attention call's common form)."""
        b, n, c = x.shape
        heads, d = self.num_heads, self.head_dim
        q = self.q(x) if torch.jit.is_scripting() else fused.linear_module(x, self.q)
        q = q.view(b, n, heads, d).transpose(1, 2)
        src, key_valid = x, valid_mask
        if self.sr is not None and self.norm is not None:
            grid = tokens_to_map(x, hw_shape)
            if valid_mask is not None:
                grid = grid * valid_mask.view(b, 1, hw_shape[0], hw_shape[1]).to(grid.dtype)
            grid = self.sr(grid)
            src = self.norm(grid.flatten(2).transpose(1, 2))
            if valid_mask is not None:
                key_valid = reduced_valid_mask(valid_mask.view(b, hw_shape[0], hw_shape[1]), self.sr_ratio,
                                               (grid.shape[2], grid.shape[3]))
        kv = self.kv(src) if torch.jit.is_scripting() else fused.linear_module(src, self.kv)
        k, v = kv.view(b, -1, 2, heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        attn_mask: torch.Tensor | None = None
        if key_valid is not None:
            attn_mask = torch.zeros(b, 1, 1, k.shape[2], dtype=q.dtype, device=q.device)
            attn_mask = attn_mask.masked_fill(~key_valid.view(b, 1, 1, -1), float('-inf'))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                             dropout_p=self.attn_drop if self.training else 0.0)
        out = out.transpose(1, 2).reshape(b, n, c)
        if torch.jit.is_scripting():
            return self.proj_drop(self.proj(out))
        return self.proj_drop(fused.linear_module(out, self.proj))


def reduced_valid_mask(valid: torch.Tensor, sr_ratio: int, reduced_hw: HW) -> torch.Tensor:
    """(B, H, W) bool of real tokens (each image's top-left block) -> (B, h*w) bool of the reduced
    keys (``reduced_hw``) that the image has alone.

    Alone, the reduction (kernel = stride = ``sr_ratio``, no padding) drops a grid's last partial
    block of rows or columns: an image of ``r`` real rows has ``r // sr_ratio`` reduced rows. In a
    padded batch that partial block is a whole block of real and (zeroed) padded rows, which must
    not become a key. An image smaller than one block (padded to the minimum input size even
    alone) keeps its one partial block, as it has alone.
    """
    rows = valid[:, :, 0].sum(1).div(sr_ratio, rounding_mode='floor').clamp_min(1)  # (B,)
    cols = valid[:, 0, :].sum(1).div(sr_ratio, rounding_mode='floor').clamp_min(1)
    h, w = reduced_hw
    keep_rows = torch.arange(h, device=valid.device).view(1, h, 1) < rows.view(-1, 1, 1)
    keep_cols = torch.arange(w, device=valid.device).view(1, 1, w) < cols.view(-1, 1, 1)
    return (keep_rows & keep_cols).reshape(valid.shape[0], h * w)
