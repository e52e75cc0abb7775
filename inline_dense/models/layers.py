"""Small building blocks shared by the InLine backbones."""
from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

HW = Tuple[int, int]


class DropPath(nn.Module):
    """Stochastic depth: drops the whole residual branch per sample."""

    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        self.drop_prob = float(drop_prob)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1.0 - self.drop_prob
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask / keep

    def extra_repr(self) -> str:
        return f'drop_prob={self.drop_prob}'


class Mlp(nn.Module):
    """Token-wise ``fc1 -> GELU -> fc2``. Input and output (B, N, C)."""

    def __init__(self, embed_dims: int, hidden_dims: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(embed_dims, hidden_dims)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dims, embed_dims)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class TransformerBlock(nn.Module):
    """Pre-norm block ``x + attn(norm1(x)); x + mlp(norm2(x))`` around any attention.

    Args:
        embed_dims: channels C.
        attn: module called as ``attn(x, hw_shape, valid_mask)`` on (B, N, C).
        mlp_ratio: hidden width of the MLP over C.
        norm_eps: LayerNorm epsilon (Swin 1e-5, PVT 1e-6).
        drop_path: stochastic depth rate of both branches.
        with_cp: recompute the block in backward to save activation memory.
    """

    def __init__(self, embed_dims: int, attn: nn.Module, mlp_ratio: float = 4.0,
                 norm_eps: float = 1e-5, drop_path: float = 0.0, with_cp: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.attn = attn
        self.norm2 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio))
        self.drop_path = DropPath(drop_path)
        self.with_cp = with_cp

    def _forward(self, x: torch.Tensor, hw_shape: HW, valid_mask: Optional[torch.Tensor]) -> torch.Tensor:
        x = x + self.drop_path(self.attn(self.norm1(x), hw_shape, valid_mask))
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def forward(self, x: torch.Tensor, hw_shape: HW,
                valid_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x: (B, H*W, C) tokens of an ``hw_shape`` grid; returns the same shape."""
        if self.with_cp and x.requires_grad:
            return checkpoint(self._forward, x, hw_shape, valid_mask, use_reentrant=False)
        return self._forward(x, hw_shape, valid_mask)


def pad_to_multiple(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """Zero-pads the last two dims of an (..., H, W) tensor on the bottom/right to multiples."""
    h, w = x.shape[-2:]
    ph, pw = (-h) % multiple, (-w) % multiple
    return F.pad(x, (0, pw, 0, ph)) if ph or pw else x


def tokens_to_map(x: torch.Tensor, hw_shape: HW) -> torch.Tensor:
    """(B, H*W, C) -> (B, C, H, W)."""
    b, _, c = x.shape
    return x.transpose(1, 2).reshape(b, c, *hw_shape)


def map_to_tokens(x: torch.Tensor) -> Tuple[torch.Tensor, HW]:
    """(B, C, H, W) -> ((B, H*W, C), (H, W))."""
    return x.flatten(2).transpose(1, 2), (x.shape[2], x.shape[3])


def run_blocks(blocks: nn.ModuleList, x: torch.Tensor, hw_shape: HW,
               valid_mask: Optional[torch.Tensor]) -> torch.Tensor:
    for block in blocks:
        x = block(x, hw_shape, valid_mask)
    return x


Factory = Callable[[int], nn.Module]
