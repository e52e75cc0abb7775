"""Small building blocks shared by the InLine backbones."""
from typing import Protocol, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..typing import HW
from . import fused
from .inline_attention import InLineAttention
from .settings import BackboneSettings


class Mlp(nn.Module):
    """Token-wise ``fc1 -> GELU -> fc2``. Input and output (B, N, C).

    Not ``timm.layers.Mlp`` (same ``fc1``/``fc2`` keys): the core depends on torch alone, and
    importing ``timm.layers`` takes seconds. For the same reason paths are dropped by
    :class:`DropPath` below, and sizes go through ``arch.to_2tuple_size`` (timm's ``to_2tuple``
    checks nothing).
    """

    def __init__(self, embed_dims: int, hidden_dims: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(embed_dims, hidden_dims)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dims, embed_dims)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """x (B, N, C) -> (B, N, C); with ``residual`` (B, N, C), ``residual + mlp(x)``: eagerly in CPU
        inference the bias, the GELU and that add run inside the two GEMMs (:mod:`.fused`)."""
        if not torch.jit.is_scripting():  # noqa: SIM102 (alone: only then does TorchScript skip the block)
            if type(self.act) is nn.GELU and self.act.approximate == 'none':
                hidden = fused.linear_module(x, self.fc1, 'gelu')
                return fused.linear_module(hidden, self.fc2, residual=residual)
        y = self.fc2(self.act(self.fc1(x)))
        return y if residual is None else residual + y


class DropPath(nn.Module):
    """Stochastic depth: in training, each sample's whole branch is zeroed with probability
    ``drop_prob`` and the kept ones are scaled by 1 / (1 - drop_prob). Input and output (B, ...).

    The same draws and values as timm's ``DropPath`` (one Bernoulli per sample, drawn with
    ``bernoulli_`` on a (B, 1, ..., 1) tensor; at ``drop_prob=1`` the branch is all zeros), so runs
    seeded alike agree. It has no parameters or buffers: state dict keys do not change.
    """

    def __init__(self, drop_prob: float = 0.0) -> None:
        super().__init__()
        self.drop_prob = drop_prob

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.drop_prob == 0.0 or not self.training:
            return x
        keep = 1.0 - self.drop_prob
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        if keep > 0.0:
            mask.div_(keep)
        return x * mask

    def extra_repr(self) -> str:
        return f'drop_prob={self.drop_prob}'


class TokenAttention(Protocol):
    """The call every attention of the backbones answers, and all :class:`TransformerBlock` makes:
    InLine, Swin's shifted windows, PVT's spatial reduction and CSwin's stripes (mypy checks each
    where a family hands it to :func:`transformer_block`).

    ``x`` (B, N, C) tokens of a ``hw_shape`` = (h, w) grid, N = h * w; ``valid_mask`` (B, N) bool,
    False at padding (None: no padding); ``residual_input`` (B, N, C), the block's input before its
    norm, which InLine's residual MLP may read (the softmax attentions ignore it). Returns (B, N, C).
    """

    def forward(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None = None,
                residual_input: torch.Tensor | None = None) -> torch.Tensor: ...


class TransformerBlock(nn.Module):
    """Pre-norm block ``x + attn(norm1(x)); x + mlp(norm2(x))`` around any attention.

    Args:
        embed_dims: channels C.
        attn: a module answering :class:`TokenAttention` (``attn(x, hw_shape, valid_mask)`` on (B, N, C)).
        mlp_ratio: hidden width of the MLP over C.
        norm_eps: LayerNorm epsilon (Swin and CSwin 1e-5, PVT 1e-6).
        drop_path: stochastic depth rate of both branches.
        with_cp: recompute the block in backward to save activation memory.
        residual_from_input: also hand the block input (before ``norm1``) to the attention as
            ``residual_input`` (InLine-CSwin's InLine blocks predict their local filter from it).
    """

    def __init__(self, embed_dims: int, attn: nn.Module, mlp_ratio: float = 4.0,
                 norm_eps: float = 1e-5, drop_path: float = 0.0, with_cp: bool = False,
                 residual_from_input: bool = False) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.attn = attn
        self.norm2 = nn.LayerNorm(embed_dims, eps=norm_eps)
        self.mlp = Mlp(embed_dims, int(embed_dims * mlp_ratio))
        # at drop_prob=1 zeros, not x / 0 = NaN as mmcv's DropPath gives
        self.drop_path = DropPath(drop_path) if drop_path > 0 else nn.Identity()
        self.with_cp = with_cp
        self.residual_from_input = residual_from_input

    def _forward(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None) -> torch.Tensor:
        if self.residual_from_input:
            y = self.attn(self.norm1(x), hw_shape, valid_mask, residual_input=x)
        else:
            y = self.attn(self.norm1(x), hw_shape, valid_mask)
        x = x + self.drop_path(y)
        if not self.training:  # no stochastic depth: the add can run inside fc2's GEMM (the mlp's residual)
            return self.mlp(self.norm2(x), residual=x)
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def forward(self, x: torch.Tensor, hw_shape: HW,
                valid_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, H*W, C) tokens of an ``hw_shape`` grid; returns the same shape."""
        # TorchScript cannot checkpoint: a scripted block recomputes nothing. is_scripting() stands alone in its if
        # (SIM102): TorchScript skips the block only then
        if not torch.jit.is_scripting():  # noqa: SIM102
            if self.with_cp and x.requires_grad:
                return checkpoint(self._forward, x, hw_shape, valid_mask, use_reentrant=False)
        return self._forward(x, hw_shape, valid_mask)


def inline_attention(settings: BackboneSettings, stage: int, *, qkv_bias: bool, attn_drop: float, proj_drop: float,
                     lepe: bool = False) -> InLineAttention:
    """The one InLine attention for a block of ``stage``: its width and heads, the settings' kernel and
    ``attn_impl``; with LePE if asked (CSwin)."""
    return InLineAttention(settings.embed_dims[stage], settings.num_heads[stage], qkv_bias, settings.kernel,
                           attn_drop, proj_drop, impl=settings.attn_impl, lepe=lepe)


def transformer_block(settings: BackboneSettings, stage: int, block: int, attn: TokenAttention, *, mlp_ratio: float,
                      norm_eps: float, with_cp: bool, residual_from_input: bool = False) -> TransformerBlock:
    """Block ``block`` of ``stage`` around ``attn``, with its stochastic-depth rate; the block input
    reaches the attention (``residual_from_input``) only in InLine blocks."""
    inline = settings.attn_kinds[stage][block] == 'I'
    return TransformerBlock(settings.embed_dims[stage], cast(nn.Module, attn), mlp_ratio, norm_eps,
                            settings.block_drop_path[stage][block], with_cp,
                            residual_from_input=residual_from_input and inline)


