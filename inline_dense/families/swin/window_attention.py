"""Softmax window attention for the 'S' blocks of InLine-Swin.

``WindowMSA`` is plain multi-head self-attention inside windows with a learned
relative position bias. ``ShiftWindowMSA`` lays a token grid out in windows:
cyclic shift on odd blocks, zero padding to whole windows (padded keys are
masked out), and crop back. A grid that fits inside one window is attended as
a single window of its own size, without shift, as the authors' Swin does.
"""
from typing import Any, Final

import torch
import torch.nn.functional as F
from torch import nn

from ...layers import fused
from ...layers.padding import padding_to_multiple
from ...layers.tensor_utils import NEG_INF, cast, check_heads, merge_heads, traced
from ...layers.tracing import fx_leaf
from ...layers.weight_init import trunc_normal_
from ...layers.windows import window_partition, window_reverse
from ...typing import HW


def relative_position_index(win_h: int, win_w: int, table_size: int) -> torch.Tensor:
    """(win_h*win_w, win_h*win_w) indices into a ((2*table_size-1)**2)-row bias table.

    Windows smaller than ``table_size`` use the central part of the same table.
    """
    coords = torch.stack(torch.meshgrid(torch.arange(win_h), torch.arange(win_w), indexing='ij')).flatten(1)
    rel = coords[:, :, None] - coords[:, None, :] + (table_size - 1)  # (2, n, n), >= 0
    return rel[0] * (2 * table_size - 1) + rel[1]


class WindowMSA(nn.Module):
    """Softmax attention inside windows with relative position bias.

    Input (B*nW, n, C) tokens of windows of size ``window_hw`` (each side <= window_size,
    n = Wh*Ww), optional additive mask (nW, n, n) or (B*nW, n, n). Output (B*nW, n, C).
    """

    relative_position_index: torch.Tensor  # a buffer (not saved)

    def __init__(self, embed_dims: int, num_heads: int, window_size: int = 7,
                 qkv_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0) -> None:
        super().__init__()
        self.head_dim = check_heads(embed_dims, num_heads, 'WindowMSA')
        self.num_heads = num_heads
        self.window_size = window_size
        self.relative_position_bias_table = nn.Parameter(
            torch.zeros((2 * window_size - 1) ** 2, num_heads))
        trunc_normal_(self.relative_position_bias_table, std=0.02)
        # the full window's index, made once (a traced graph reads it instead of rebuilding it);
        # not saved: the authors' checkpoints hold theirs, which the conversion drops
        self.register_buffer('relative_position_index',
                             relative_position_index(window_size, window_size, window_size), persistent=False)
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        self.attn_drop = attn_drop
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)

    def init_non_persistent_buffers(self) -> None:
        """Recomputes ``relative_position_index`` (not saved) where the buffer lives: after a
        meta-device build and ``to_empty()`` it holds garbage (timm's
        ``reinit_non_persistent_buffers`` calls this; a state-dict load does too)."""
        index = relative_position_index(self.window_size, self.window_size, self.window_size)
        with torch.no_grad():
            self.relative_position_index.copy_(index.to(self.relative_position_index.device))

    def _load_from_state_dict(self, *args: Any, **kwargs: Any) -> None:
        # a load restores every saved tensor; the unsaved index is made again, so that a model built
        # on the meta device, then to_empty() and load_state_dict(), equals one built normally
        super()._load_from_state_dict(*args, **kwargs)
        if self.relative_position_index.device.type != 'meta':
            self.init_non_persistent_buffers()

    def position_bias(self, window_hw: HW) -> torch.Tensor:
        """(heads, n, n) bias for a window of ``window_hw``."""
        if window_hw == (self.window_size, self.window_size):
            index = self.relative_position_index
        else:  # a grid within one window, attended as a window of its own size
            index = relative_position_index(*window_hw, self.window_size).to(self.relative_position_bias_table.device)
        n = window_hw[0] * window_hw[1]
        return self.relative_position_bias_table[index.view(-1)].view(n, n, -1).permute(2, 0, 1)

    def forward(self, x: torch.Tensor, window_hw: HW, mask: torch.Tensor | None = None) -> torch.Tensor:
        bw, n, _c = x.shape
        qkv = self.qkv(x) if torch.jit.is_scripting() else fused.linear_module(x, self.qkv)
        qkv = qkv.view(bw, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B*nW, h, n, d)
        bias = self.position_bias(window_hw).unsqueeze(0)  # (1, h, n, n)
        if mask is not None:  # (nW, n, n) shared by the batch, or (B*nW, n, n)
            if mask.shape[0] != bw:
                mask = mask.repeat(bw // mask.shape[0], 1, 1)
            bias = bias + cast(mask.unsqueeze(1), bias.dtype)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=cast(bias, q.dtype),
                                             dropout_p=self.attn_drop if self.training else 0.0)
        if torch.jit.is_scripting():
            return self.proj_drop(self.proj(merge_heads(out)))
        return self.proj_drop(fused.linear_module(merge_heads(out), self.proj))


def shift_regions(size: int, win: int, shift: int, device: torch.device) -> torch.Tensor:
    """(size,) region of each row (or column) of a shifted grid: 0, 1 or 2."""
    i = torch.arange(size, device=device)
    return (i >= size - win).long() + (i >= size - shift).long()


def wrap(index: torch.Tensor, size: int) -> torch.Tensor:
    """Indices in (-size, 2 * size) taken into [0, size)."""
    index = torch.where(index >= size, index - size, index)
    return torch.where(index < 0, index + size, index)


def shift_regions_traced(size: int, win: int, shift: torch.Tensor, device: torch.device) -> torch.Tensor:
    """``shift_regions`` with the shift a 0-d tensor (0: one region)."""
    i = torch.arange(size, device=device)
    return (i >= size - win).long() + (i >= size - shift).long()


def shift_region_mask(hw: HW, win: int, shift: int, device: torch.device,
                      neg_inf: float = NEG_INF) -> torch.Tensor:
    """(nW, n, n) additive mask keeping a shifted window's wrapped regions apart.

    Along each axis the grid has three regions (before the last window, the last window's first
    ``win - shift`` rows or columns, its last ``shift``): a token's region is 3 * row + column."""
    h, w = hw
    ids = (shift_regions(h, win, shift, device).view(1, h, 1, 1) * 3
           + shift_regions(w, win, shift, device).view(1, 1, w, 1))
    ids = window_partition(ids, win).squeeze(-1)  # (nW, n)
    different = ids.unsqueeze(1) != ids.unsqueeze(2)
    return different.float() * neg_inf


@fx_leaf
class ShiftWindowMSA(nn.Module):
    """(Shifted) window attention over a whole H x W grid with padding and cropping.

    Args:
        shift: shift the windows by half a window (odd blocks).
        others: see ``WindowMSA``.

    ``x`` (B, H*W, C), ``valid_mask`` optional (B, H*W) bool of real tokens.
    """

    neg_inf: Final[float] = NEG_INF  # a constant to TorchScript, which reads no float globals

    def __init__(self, embed_dims: int, num_heads: int, window_size: int = 7, shift: bool = False,
                 qkv_bias: bool = True, attn_drop: float = 0.0, proj_drop: float = 0.0) -> None:
        super().__init__()
        if window_size < 1:
            raise ValueError(f'window_size must be >= 1, got {window_size}.')
        self.window_size = window_size
        self.shift = shift
        self.w_msa = WindowMSA(embed_dims, num_heads, window_size, qkv_bias, attn_drop, proj_drop)

    def extra_repr(self) -> str:
        return f'window_size={self.window_size}, shift={self.shift}'

    def forward(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None = None,
                residual_input: torch.Tensor | None = None) -> torch.Tensor:  # noqa: ARG002
        """(B, N, C) -> (B, N, C); ``residual_input`` is not used (the attention call's common form)."""
        b, n, c = x.shape
        h, w = hw_shape
        win = self.window_size
        # traced: never this branch, which a graph would keep for every size (see ``_shift``)
        if not traced() and h <= win and w <= win:  # one window, the grid itself, no shift
            mask: torch.Tensor | None = None
            if valid_mask is not None:
                mask = torch.zeros(b, 1, n, n, dtype=x.dtype, device=x.device)
                mask = mask.masked_fill(~valid_mask.view(b, 1, 1, n), self.neg_inf).view(b, n, n)
            return self.w_msa(x, (h, w), mask)

        grid = x.view(b, h, w, c)
        pad_h, pad_w = padding_to_multiple(h, win), padding_to_multiple(w, win)
        grid = F.pad(grid, (0, 0, 0, pad_w, 0, pad_h))
        hp, wp = h + pad_h, w + pad_w
        shift = win // 2 if self.shift else 0
        if traced() and shift > 0:  # the same function as eagerly, one graph for every size
            return self._shift_traced(grid, valid_mask, hw_shape)

        key_valid: torch.Tensor | None = None
        if traced() or pad_h > 0 or pad_w > 0 or valid_mask is not None:  # traced: no branch on the size
            key_valid = torch.zeros(b, hp, wp, dtype=torch.bool, device=x.device)
            if valid_mask is None:
                key_valid[:, :h, :w] = True
            else:
                key_valid[:, :h, :w] = valid_mask.view(b, h, w)
        if shift > 0:
            grid = torch.roll(grid, (-shift, -shift), dims=(1, 2))
            if key_valid is not None:
                key_valid = torch.roll(key_valid, (-shift, -shift), dims=(1, 2))

        windows = window_partition(grid, win)  # (B*nW, n, C)
        nw = (hp // win) * (wp // win)  # windows per image
        window_mask: torch.Tensor | None = None
        if shift > 0:
            window_mask = shift_region_mask((hp, wp), win, shift, x.device)  # (nW, n, n)
        if key_valid is not None:
            kv = window_partition(key_valid.unsqueeze(-1).to(x.dtype), win).view(b, nw, 1, win * win)
            pad_mask = (1 - kv) * self.neg_inf  # (B, nW, 1, n)
            window_mask = pad_mask if window_mask is None else window_mask.unsqueeze(0) + pad_mask
            window_mask = window_mask.expand(b, nw, win * win, win * win).reshape(b * nw, win * win, win * win)
        out = self.w_msa(windows, (win, win), window_mask)
        grid = window_reverse(out, win, (hp, wp), b)
        if shift > 0:
            grid = torch.roll(grid, (shift, shift), dims=(1, 2))
        out = grid[:, :h, :w, :]
        if traced():  # an explicit copy: reshape's view-or-copy choice would guard on the strides
            out = out.clone(memory_format=torch.contiguous_format)
        out = out.reshape(b, n, c)
        if shift > 0 and valid_mask is not None:
            out = self._one_window_images(x, out, valid_mask, hw_shape)
        return out

    def _shift_traced(self, grid: torch.Tensor, valid_mask: torch.Tensor | None, hw_shape: HW) -> torch.Tensor:
        """The shifted windows of the padded (B, Hp, Wp, C) ``grid`` of an ``hw_shape`` grid, traced:
        eagerly a grid within one window takes one unshifted window (the branch in ``forward``), which
        a traced graph would keep (or leave out) for every size. Here the shift is a tensor, half a
        window, or 0 where the grid fits in one window; the cyclic shift is a gather, so one graph
        gives the eager result at any size (unshifted, a padded window with its padding masked is the
        one window of the grid's own size). -> (B, H*W, C)."""
        b, hp, wp, c = grid.shape
        h, w = hw_shape
        win = self.window_size
        rows = torch.arange(hp, device=grid.device)
        cols = torch.arange(wp, device=grid.device)
        # the grid's sides as tensors (reductions keep traced sizes symbolic; a comparison of sizes
        # would be a constant of the example)
        fits = ((rows < h).sum() <= win) & ((cols < w).sum() <= win)
        shift = torch.where(fits, 0, win // 2)
        key_valid = torch.zeros(b, hp, wp, dtype=torch.bool, device=grid.device)
        if valid_mask is None:
            key_valid[:, :h, :w] = True
        else:
            key_valid[:, :h, :w] = valid_mask.view(b, h, w)
        # torch.roll(-shift) as a gather; 0 <= shift < a side, so one wrap (no % by a traced size: the
        # ONNX exporter cannot translate it)
        into_rows, into_cols = wrap(rows + shift, hp), wrap(cols + shift, wp)
        grid = grid.index_select(1, into_rows).index_select(2, into_cols)
        key_valid = key_valid.index_select(1, into_rows).index_select(2, into_cols)
        windows = window_partition(grid, win)
        nw = (hp // win) * (wp // win)
        ids = (shift_regions_traced(hp, win, shift, grid.device).view(1, hp, 1, 1) * 3
               + shift_regions_traced(wp, win, shift, grid.device).view(1, 1, wp, 1))
        ids = window_partition(ids, win).squeeze(-1)  # (nW, n)
        region_mask = (ids.unsqueeze(1) != ids.unsqueeze(2)).to(grid.dtype) * self.neg_inf
        kv = window_partition(key_valid.unsqueeze(-1).to(grid.dtype), win).view(b, nw, 1, win * win)
        window_mask = region_mask.unsqueeze(0) + (1 - kv) * self.neg_inf
        window_mask = window_mask.expand(b, nw, win * win, win * win).reshape(b * nw, win * win, win * win)
        out = window_reverse(self.w_msa(windows, (win, win), window_mask), win, (hp, wp), b)
        out = out.index_select(1, wrap(rows - shift, hp)).index_select(2, wrap(cols - shift, wp))  # torch.roll(shift)
        out = out[:, :h, :w, :].clone(memory_format=torch.contiguous_format)
        return out.reshape(b, h * w, c)

    def _one_window_images(self, x: torch.Tensor, out: torch.Tensor, valid_mask: torch.Tensor,
                           hw_shape: HW) -> torch.Tensor:
        """Images of a padded batch whose real grid fits in one window get what they get alone:
        one unshifted window of their own size (the rule above), not the batch's shifted windows."""
        b, n, c = x.shape
        h, w = hw_shape
        grid_mask = valid_mask.view(b, h, w)
        rows: list[int] = grid_mask[:, :, 0].sum(1).tolist()
        cols: list[int] = grid_mask[:, 0, :].sum(1).tolist()
        small: list[int] = []
        for i in range(b):  # a loop, not a filtered comprehension: TorchScript
            if 0 < rows[i] <= self.window_size and 0 < cols[i] <= self.window_size:
                small.append(i)
        if len(small) == 0:
            return out
        out = out.view(b, h, w, c).clone()
        for i in small:
            vh, vw = rows[i], cols[i]
            tokens = x[i:i + 1].view(1, h, w, c)[:, :vh, :vw].reshape(1, vh * vw, c)
            out[i, :vh, :vw] = self.w_msa(tokens, (vh, vw)).view(vh, vw, c)
        return out.view(b, n, c)
