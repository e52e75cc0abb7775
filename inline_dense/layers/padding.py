"""Padding: to multiples of a patch or window, to a minimum size, and the padding of a batch.

A batch of images of different sizes is padded bottom/right to one tensor; each image's real size in
input pixels (``valid_hw``, one (h, w) per image) says which tokens of a grid at a stride are
image: :func:`valid_grid_sizes` and :func:`valid_token_mask`, the one primitive from image sizes to
token masks. Symbolic tracing keeps the size-dependent helpers as calls (``tracing.fx_wrap``): call
them through this module (``padding.pad_to_multiple``)."""
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..typing import HW
from .tensor_utils import traced
from .tracing import fx_wrap


def padding_to_multiple(size: int, multiple: int) -> int:
    """What ``size`` needs to become a multiple of ``multiple``: multiple * ceil(size / multiple) - size.

    Not (-size) % multiple: the same number, but a traced graph's symbolic sizes stay short
    expressions that the later layers' shapes simplify (and no negative number is floor-divided:
    ONNX's integer Div truncates towards zero)."""
    return multiple * ((size + multiple - 1) // multiple) - size


@fx_wrap
def pad_to_multiple(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """Zero-pads the last two dims of an (..., H, W) tensor on the bottom/right to multiples."""
    h, w = x.shape[-2:]
    ph, pw = padding_to_multiple(h, multiple), padding_to_multiple(w, multiple)
    return F.pad(x, (0, pw, 0, ph)) if traced() or ph or pw else x  # traced: no branch on the size


@fx_wrap
def pad_to_min_size(x: torch.Tensor, valid_hw: Optional[List[HW]],
                    min_size: int) -> Tuple[torch.Tensor, Optional[List[HW]]]:
    """(B, C, H, W) zero-padded bottom/right to at least ``min_size`` per side, with ``valid_hw``
    (each image's real size; the whole input when None) so that the padding is masked."""
    h, w = x.shape[-2], x.shape[-1]
    if min(h, w) >= min_size:
        return x, valid_hw
    padded = nn.functional.pad(x, (0, max(min_size - w, 0), 0, max(min_size - h, 0)))
    return padded, valid_hw if valid_hw is not None else [(h, w) for _ in range(x.shape[0])]


def valid_grid_sizes(valid_hw: Optional[List[HW]], batch_hw: HW, stride: int) -> Optional[List[HW]]:
    """Per image, its token grid (rows, cols) at ``stride``; None when no image is padded."""
    if valid_hw is None:
        return None
    h, w = batch_hw
    sizes: List[HW] = []
    padded = False
    for size in valid_hw:  # loops, not comprehensions: TorchScript
        rows, cols = min((size[0] + stride - 1) // stride, h), min((size[1] + stride - 1) // stride, w)
        padded = padded or rows < h or cols < w
        sizes.append((rows, cols))
    return sizes if padded else None


@fx_wrap
def valid_token_mask(valid_hw: Optional[List[HW]], batch_hw: HW, stride: int,
                     device: torch.device) -> Optional[torch.Tensor]:
    """(B, h*w) bool of tokens that overlap each image's real (unpadded) pixels, or None.

    ``valid_hw`` holds each image's real size in input pixels; ``batch_hw`` is the token
    grid at ``stride``. None when no image is padded beyond what its own size needs.
    """
    sizes = valid_grid_sizes(valid_hw, batch_hw, stride)
    if sizes is None:
        return None
    h, w = batch_hw
    rows = torch.arange(h, device=device).view(1, h, 1)
    cols = torch.arange(w, device=device).view(1, 1, w)
    limit_rows = torch.tensor([s[0] for s in sizes], device=device).view(-1, 1, 1)
    limit_cols = torch.tensor([s[1] for s in sizes], device=device).view(-1, 1, 1)
    mask = (rows < limit_rows) & (cols < limit_cols)
    return mask.view(len(sizes), h * w)


@fx_wrap
def zero_padding(tokens: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """(B, N, C) tokens with the padded ones (``mask`` False) set to 0, as an unpadded image's
    zero padding would be; unchanged when ``mask`` is None. Used before every downsampling,
    whose windows reach past an image's border."""
    return tokens if mask is None else tokens * mask.unsqueeze(-1).to(tokens.dtype)
