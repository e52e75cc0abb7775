"""Softmax attention in CSwin's cross-shaped stripes, with LePE, for InLine-CSwin's 'S' blocks.

A two-branch block splits the channels (and heads) in half: branch 0 attends inside
vertical stripes (the full height x ``split_size`` columns), branch 1 inside horizontal
stripes (``split_size`` rows x the full width); their outputs are concatenated. A
one-branch block (the last stage) attends over the whole map. In every window LePE, a
3x3 depthwise conv with bias over v on the window's grid (zero padding at its border),
is added to the attention output.

Any H x W works: the grid is zero-padded to whole stripes, padded keys are masked out,
and the output is cropped back. Batch padding (``valid_mask``) is treated the same way.
"""
from typing import Final

import torch
import torch.nn.functional as F
from torch import nn

from ...layers import fused
from ...layers.padding import padding_to_multiple
from ...layers.tensor_utils import NEG_INF, check_heads, merge_heads, traced
from ...layers.tracing import fx_leaf
from ...layers.windows import window_partition, window_reverse
from ...typing import HW

# a branch's window (rows, cols); None spans that whole side of the grid
Stripe = tuple[int | None, int | None]


@fx_leaf
class CSwinStripeAttention(nn.Module):
    """Cross-shaped stripe softmax attention with LePE.

    Args:
        embed_dims: channels C (head-major, q | k | v from one ``qkv`` projection).
        num_heads: heads of the block; each of two branches gets half of them.
        split_size: stripe width of a two-branch block.
        num_branches: 2 (stripes) or 1 (one window over the whole map).
        qkv_bias, attn_drop, proj_drop: as usual.

    ``x`` (B, H*W, C) tokens of ``hw_shape``; ``valid_mask`` optional (B, H*W) bool of real
    tokens. Output (B, H*W, C).
    """

    neg_inf: Final[float] = NEG_INF  # a constant to TorchScript, which reads no float globals

    def __init__(self, embed_dims: int, num_heads: int, split_size: int, num_branches: int = 2,
                 qkv_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0) -> None:
        super().__init__()
        if num_branches not in (1, 2):
            raise ValueError(f'CSwinStripeAttention: num_branches must be 1 or 2, got {num_branches}.')
        if split_size < 1:
            raise ValueError(f'CSwinStripeAttention: split_size must be >= 1, got {split_size}.')
        if num_heads % num_branches:
            raise ValueError(f'CSwinStripeAttention: a two-branch block splits its {num_heads} heads in half; '
                             f'use an even number of heads for this stage.')
        branch_dims = embed_dims // num_branches
        self.branch_heads = num_heads // num_branches
        check_heads(branch_dims, self.branch_heads, 'CSwinStripeAttention (one branch)')
        self.split_size = split_size
        self.num_branches = num_branches
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.get_v = nn.ModuleList(
            nn.Conv2d(branch_dims, branch_dims, 3, padding=1, groups=branch_dims) for _ in range(num_branches))
        self.attn_drop = attn_drop
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def extra_repr(self) -> str:
        return f'split_size={self.split_size}, num_branches={self.num_branches}'

    def stripes(self) -> list[Stripe]:
        """Per branch, its window's (rows, cols); None spans that whole side of the grid."""
        if self.num_branches == 1:
            return [(None, None)]
        return [(None, self.split_size), (self.split_size, None)]

    def forward(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None = None,
                residual_input: torch.Tensor | None = None) -> torch.Tensor:  # noqa: ARG002
        """(B, N, C) -> (B, N, C); ``residual_input`` is not used (the attention call's common form)."""
        b, n, c = x.shape
        h, w = hw_shape
        qkv = self.qkv(x) if torch.jit.is_scripting() else fused.linear_module(x, self.qkv)
        valid: torch.Tensor | None = None
        if valid_mask is not None:
            qkv = qkv * valid_mask.unsqueeze(-1).to(qkv.dtype)  # padded v is 0, as beyond an image's border
            valid = valid_mask.view(b, h, w)
        q, k, v = qkv.view(b, h, w, 3, c).unbind(3)
        cb = c // self.num_branches
        stripes = self.stripes()
        outs: list[torch.Tensor] = []
        for i, get_v in enumerate(self.get_v):  # a loop over the module list: TorchScript indexes none
            lo, hi = i * cb, (i + 1) * cb
            outs.append(self.branch(q[..., lo:hi], k[..., lo:hi], v[..., lo:hi], stripes[i],
                                    get_v.weight, get_v.bias, valid))  # type: ignore[arg-type]
        out = torch.cat(outs, -1) if len(outs) > 1 else outs[0]
        if torch.jit.is_scripting():
            return self.proj_drop(self.proj(out.reshape(b, n, c)))
        return self.proj_drop(fused.linear_module(out.reshape(b, n, c), self.proj))

    def branch(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, stripe: Stripe, lepe_weight: torch.Tensor,
               lepe_bias: torch.Tensor | None, valid: torch.Tensor | None) -> torch.Tensor:
        """q, k, v (B, H, W, c) of one branch -> (B, H, W, c): softmax in the ``stripe`` windows + LePE
        (the branch's ``get_v``, a 3x3 depthwise conv given by its weight and bias)."""
        b, h, w, c = q.shape
        rows, cols = stripe
        # a side the window spans is never padded, nor divided by itself: traced with symbolic
        # sizes, (-h) % h and (h + pad) // h are costly symbolic algebra that ends in 0 and 1
        pad_h = 0 if rows is None else padding_to_multiple(h, rows)
        pad_w = 0 if cols is None else padding_to_multiple(w, cols)
        wh = h if rows is None else rows
        ww = w if cols is None else cols
        win = (wh, ww)
        # traced: no branch on the size
        padded = (rows is not None or cols is not None) and (traced() or pad_h > 0 or pad_w > 0)
        if padded:
            q = F.pad(q, (0, 0, 0, pad_w, 0, pad_h))
            k = F.pad(k, (0, 0, 0, pad_w, 0, pad_h))
            v = F.pad(v, (0, 0, 0, pad_w, 0, pad_h))
        hp, wp = h + pad_h, w + pad_w
        heads = self.branch_heads
        d = c // heads
        qw, kw, vw = window_partition(q, win), window_partition(k, win), window_partition(v, win)
        n_win = qw.shape[0]  # B * windows per image; spelled out below, no -1 (see window_partition)
        mask: torch.Tensor | None = None
        if padded or valid is not None:
            key_valid = torch.zeros(b, hp, wp, 1, dtype=q.dtype, device=q.device)
            if valid is None:
                key_valid[:, :h, :w] = 1
            else:
                key_valid[:, :h, :w] = valid.unsqueeze(-1).to(q.dtype)
            mask = ((1 - window_partition(key_valid, win)) * self.neg_inf).view(n_win, 1, 1, wh * ww)
        # channels-last: the windows' own memory, and the output flattens back to contiguous tokens
        v_map = vw.reshape(n_win, wh, ww, c).permute(0, 3, 1, 2)
        if traced():
            # channels-first: with symbolic sizes and one window in the batch, inductor (torch 2.14) plans this
            # depthwise conv's output channels-last where oneDNN writes it channels-first, and the compiled graph
            # fails its stride check at run time (the last stage's full-map stripe)
            v_map = v_map.contiguous()
        lepe = F.conv2d(v_map, lepe_weight, lepe_bias, padding=1, groups=c)
        lepe = lepe.flatten(2).transpose(1, 2)
        out = F.scaled_dot_product_attention(split_heads(qw, heads, d), split_heads(kw, heads, d),
                                             split_heads(vw, heads, d), attn_mask=mask,
                                             dropout_p=self.attn_drop if self.training else 0.0)
        out = merge_heads(out) + lepe
        return window_reverse(out, win, (hp, wp), b)[:, :h, :w]


def split_heads(t: torch.Tensor, heads: int, d: int) -> torch.Tensor:
    """(B*nW, n, heads*d) -> (B*nW, heads, n, d)."""
    return t.view(t.shape[0], t.shape[1], heads, d).transpose(1, 2)
