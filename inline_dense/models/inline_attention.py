"""InLine attention: injective linear attention with a local residual.

Per head, with ``s = head_dim ** -0.5``, tokens ``j = 1..N`` and kernel ``phi``
applied to queries and keys, InLine replaces softmax's division by a
*subtraction* that makes every query's weights sum to one::

    w_ij  = s/N * (q_i . k_j) - s/N * (q_i . mean(k)) + 1/N
    out_i = sum_j w_ij v_j
          = s * q_i^T (K^T V / N - mean(k) mean(v)^T) + mean(v)

The bracket is a (head_dim x head_dim) matrix, so the cost is linear in N.
A local residual is added: a 3x3 depthwise filter over V (on the H x W grid,
zero padding) whose 9 taps per channel an MLP predicts from the mean token.
"""
from typing import Callable, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

HW = Tuple[int, int]

KERNELS: Dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    'identity': lambda t: t,
    'relu': F.relu,
    'leakyrelu': F.leaky_relu,
    'exp': torch.exp,
}


def check_heads(embed_dims: int, num_heads: int, where: str) -> int:
    """Returns head_dim; raises a ValueError a user can act on otherwise."""
    if num_heads <= 0 or embed_dims % num_heads:
        raise ValueError(
            f'{where}: embed_dims={embed_dims} is not divisible by num_heads={num_heads}; '
            f'choose num_heads among the divisors of {embed_dims}.')
    return embed_dims // num_heads


def masked_token_mean(x: torch.Tensor, valid_mask: Optional[torch.Tensor]) -> torch.Tensor:
    """Mean over tokens of (B, N, C) -> (B, C), over valid tokens only when a (B, N) mask is given."""
    if valid_mask is None:
        return x.mean(1)
    w = valid_mask.to(x.dtype).unsqueeze(-1)
    return (x * w).sum(1) / w.sum(1).clamp_min(1)


class InLineAttention(nn.Module):
    """Global InLine attention over an H x W token grid.

    Args:
        embed_dims: channels C (head-major: channel = head * head_dim + d).
        num_heads: number of heads.
        qkv_bias: bias of the fused q | k | v projection.
        kernel: phi applied to q and k: 'identity' (all released models), 'relu',
            'leakyrelu' or 'exp'.
        attn_drop: dropout on the attention output before the residual (as in training code).
        proj_drop: dropout after the output projection.

    Input ``x`` is (B, N, C) with ``N = H * W`` in row-major order of ``hw_shape``;
    ``valid_mask`` (B, N) bool marks real (non-padded) tokens. Output (B, N, C).
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True,
                 kernel: str = 'identity', attn_drop: float = 0.0, proj_drop: float = 0.0) -> None:
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"InLineAttention: unknown kernel {kernel!r}; use one of {sorted(KERNELS)}.")
        self.head_dim = check_heads(embed_dims, num_heads, 'InLineAttention')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.scale = self.head_dim ** -0.5
        self.kernel = kernel
        self.phi = KERNELS[kernel]
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        # MLP from the mean token to 9 depthwise taps per channel: output 9c+t is tap t of channel c.
        self.residual = nn.Sequential(
            nn.Conv1d(embed_dims, embed_dims, 1, groups=num_heads),
            nn.GELU(),
            nn.Conv1d(embed_dims, embed_dims * 9, 1, groups=num_heads),
        )
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def extra_repr(self) -> str:
        return f'num_heads={self.num_heads}, kernel={self.kernel!r}'

    def forward(self, x: torch.Tensor, hw_shape: HW,
                valid_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        b, n, c = x.shape
        h, w = hw_shape
        if h * w != n:
            raise ValueError(f'InLineAttention: hw_shape {hw_shape} does not match {n} tokens.')
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if valid_mask is not None:
            keep = valid_mask.unsqueeze(-1).to(v.dtype)
            k, v = k * keep, v * keep
        out = self.global_attention(q, k, v, valid_mask)
        taps = self.residual(masked_token_mean(x, valid_mask).unsqueeze(-1))  # (B, 9C, 1)
        out = self.attn_drop(out) + self.local_residual(v, taps, hw_shape)
        return self.proj_drop(self.proj(out))

    def global_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         valid_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """q, k, v (B, N, C) (k, v already zero at padded tokens) -> (B, N, C)."""
        b, n, c = q.shape
        heads, d = self.num_heads, self.head_dim
        q = self.phi(q).view(b, n, heads, d).transpose(1, 2)  # (B, h, N, d)
        k = self.phi(k)
        if valid_mask is not None and self.kernel != 'identity':
            k = k * valid_mask.unsqueeze(-1).to(k.dtype)  # phi(0) need not be 0
        k = k.view(b, n, heads, d).transpose(1, 2)
        v = v.view(b, n, heads, d).transpose(1, 2)
        if valid_mask is None:
            count = torch.full((b, 1, 1, 1), float(n), device=q.device)
        else:
            count = valid_mask.sum(1).clamp_min(1).to(torch.float32).view(b, 1, 1, 1)
        # Sums over all tokens run in float32 even under autocast: at detection
        # resolution they add up hundreds of thousands of terms and overflow fp16.
        with torch.autocast(device_type=q.device.type, enabled=False):
            kf, vf = k.float(), v.float()
            mean_k = kf.sum(2, keepdim=True) / count  # (B, h, 1, d)
            mean_v = vf.sum(2, keepdim=True) / count
            ctx = kf.transpose(-2, -1) @ vf / count - mean_k.transpose(-2, -1) @ mean_v  # (B, h, d, d)
            ctx = ctx * self.scale
        out = (q @ ctx.to(q.dtype)) + mean_v.to(q.dtype)
        return out.transpose(1, 2).reshape(b, n, c)

    @staticmethod
    def local_residual(v: torch.Tensor, taps: torch.Tensor, hw_shape: HW) -> torch.Tensor:
        """3x3 depthwise filter with per-sample taps over v: (B, N, C), (B, 9C, 1) -> (B, N, C)."""
        b, n, c = v.shape
        vmap = v.transpose(1, 2).reshape(1, b * c, *hw_shape)
        weight = taps.reshape(b * c, 1, 3, 3).to(v.dtype)
        out = F.conv2d(vmap, weight, padding=1, groups=b * c)
        return out.reshape(b, c, n).transpose(1, 2)
