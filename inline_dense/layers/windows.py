"""Window layout of a token grid: (B, H, W, C) <-> (B * windows, window tokens, C), for the window
attentions (Swin's shifted windows, CSwin's stripes)."""

import torch

from ..typing import HW


def window_partition(x: torch.Tensor, win: int | HW) -> torch.Tensor:
    """(B, H, W, C) with H, W multiples of the window (wh, ww), or of ``win`` x ``win`` for an int
    -> (B*nW, wh*ww, C), windows in row-major order per image."""
    wh, ww = (win, win) if isinstance(win, int) else win
    b, h, w, c = x.shape
    rows, cols = h // wh, w // ww
    # every size spelled out (no -1): traced with symbolic sizes, inferring one dim divides the
    # element count by a product of floor divisions, seconds of symbolic algebra per call
    x = x.view(b, rows, wh, cols, ww, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(b * rows * cols, wh * ww, c)


def window_reverse(windows: torch.Tensor, win: int | HW, hw: HW, batch: int) -> torch.Tensor:
    """(B*nW, wh*ww, C) from :func:`window_partition` -> (B, H, W, C) of the ``hw`` grid,
    ``batch`` = B."""
    wh, ww = (win, win) if isinstance(win, int) else win
    h, w = hw
    c = windows.shape[-1]
    x = windows.view(batch, h // wh, w // ww, wh, ww, c).permute(0, 1, 3, 2, 4, 5)
    return x.reshape(batch, h, w, c)
