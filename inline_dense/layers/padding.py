"""Padding: to multiples of a patch or window, to a minimum size, and the padding of a batch.

A batch of images of different sizes is padded bottom/right to one tensor; each image's real size in
input pixels (``valid_hw``, one (h, w) per image) says which cells of a grid at a stride are image:
:func:`valid_grid_mask`, the one primitive from image sizes to masks (the backbones' token masks,
:func:`valid_token_mask`; the torchvision adapter's FPN and anchor masks). :class:`PaddedBatchSizes`
is how the adapters hand a batch's sizes to a backbone that their framework calls with the padded
tensor alone (the OpenMMLab hook, the torchvision wrapper). Symbolic tracing keeps the size-dependent
helpers as calls (``tracing.fx_wrap``): call them through this module (``padding.pad_to_multiple``)."""
from collections.abc import Sequence
from typing import Any

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
def pad_to_min_size(x: torch.Tensor, valid_hw: list[HW] | None,
                    min_size: int) -> tuple[torch.Tensor, list[HW] | None]:
    """(B, C, H, W) zero-padded bottom/right to at least ``min_size`` per side, with ``valid_hw``
    (each image's real size; the whole input when None) so that the padding is masked."""
    h, w = x.shape[-2], x.shape[-1]
    if min(h, w) >= min_size:
        return x, valid_hw
    padded = nn.functional.pad(x, (0, max(min_size - w, 0), 0, max(min_size - h, 0)))
    return padded, valid_hw if valid_hw is not None else [(h, w) for _ in range(x.shape[0])]


def valid_grid_sizes(valid_hw: list[HW] | None, batch_hw: HW, stride: int) -> list[HW] | None:
    """Per image, its token grid (rows, cols) at ``stride``; None when no image is padded.

    Traced (``torch.compile``), the sizes whether or not any image is padded: a comparison of the sizes
    would guard the graph on it, and a test pipeline's next image, padded at another stride, would
    compile another graph; the masks built from the sizes are then all True where nothing is padded."""
    if valid_hw is None:
        return None
    h, w = batch_hw
    sizes: list[HW] = []
    padded = traced()
    for size in valid_hw:  # loops, not comprehensions: TorchScript
        rows, cols = min((size[0] + stride - 1) // stride, h), min((size[1] + stride - 1) // stride, w)
        if not padded:
            padded = rows < h or cols < w
        sizes.append((rows, cols))
    return sizes if padded else None


@fx_wrap
def valid_token_mask(valid_hw: list[HW] | None, batch_hw: HW, stride: int,
                     device: torch.device) -> torch.Tensor | None:
    """(B, h*w) bool of tokens that overlap each image's real (unpadded) pixels, or None.

    ``valid_hw`` holds each image's real size in input pixels; ``batch_hw`` is the token
    grid at ``stride``. None when no image is padded beyond what its own size needs.
    """
    if valid_hw is None or valid_grid_sizes(valid_hw, batch_hw, stride) is None:
        return None
    return valid_grid_mask(valid_hw, batch_hw, stride, device).view(len(valid_hw), batch_hw[0] * batch_hw[1])


def valid_grid_mask(valid_hw: list[HW], grid_hw: HW, stride: int, device: torch.device) -> torch.Tensor:
    """(B, h, w) bool: True on the cells of the ``grid_hw`` grid at ``stride`` that overlap image b's
    real ``valid_hw[b]`` pixels (``ceil(size / stride)`` rows and columns from the top left)."""
    h, w = grid_hw
    rows = torch.arange(h, device=device).view(1, h, 1)
    cols = torch.arange(w, device=device).view(1, 1, w)
    limit_rows = torch.tensor([(s[0] + stride - 1) // stride for s in valid_hw], device=device).view(-1, 1, 1)
    limit_cols = torch.tensor([(s[1] + stride - 1) // stride for s in valid_hw], device=device).view(-1, 1, 1)
    return (rows < limit_rows) & (cols < limit_cols)


@fx_wrap
def zero_outside_valid(x: torch.Tensor, valid_hw: list[HW] | None) -> torch.Tensor:
    """(B, C, H, W) with each image's pixels outside its real ``valid_hw[b]`` size set to 0, whatever
    they held (a ``pad_value`` such as 114, noise, NaN): what the image meets alone, zero padding. The
    same tensor when nothing is padded (``valid_hw`` None or every image the whole input).

    The backbone's first step: a patch embedding's partial patch, a stem's kernel reaching past the
    border, read the padding otherwise."""
    if valid_hw is None:
        return x
    h, w = x.shape[-2], x.shape[-1]
    padded = traced()  # traced: no comparison of sizes, which would guard the graph (``valid_grid_sizes``)
    for size in valid_hw:  # a loop, not any(): TorchScript
        if not padded:
            padded = size[0] < h or size[1] < w
    if not padded:
        return x
    keep = valid_grid_mask(valid_hw, (h, w), 1, x.device).unsqueeze(1)  # (B, 1, H, W)
    return x.masked_fill(~keep, 0.0)


@fx_wrap
def with_prefix_tokens(mask: torch.Tensor | None, num_prefix_tokens: int) -> torch.Tensor | None:
    """A (B, h*w) token mask (or None) with ``num_prefix_tokens`` True columns first: (B, P + h*w), for
    a ViT's tokens (its cls token first), which are never padding."""
    if mask is None or num_prefix_tokens == 0:
        return mask
    return torch.cat([mask.new_ones(mask.shape[0], num_prefix_tokens), mask], 1)


@fx_wrap
def zero_padding(tokens: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """(B, N, C) tokens with the padded ones (``mask`` False) set to 0, as an unpadded image's
    zero padding would be; unchanged when ``mask`` is None. Used before every downsampling,
    whose windows reach past an image's border."""
    return tokens if mask is None else tokens * mask.unsqueeze(-1).to(tokens.dtype)


class PaddedBatchSizes:
    """The real image sizes of one padded batch, for a backbone that its framework calls with the padded
    tensor alone: ``record`` them (a hook on the model or its preprocessing), then ``for_input`` gives
    them for that very batch only (the same batch size and spatial size), so a backbone run on crops
    (slide inference) or on other tensors is left alone."""

    def __init__(self) -> None:
        self.batch_hw: tuple[int, int, int] | None = None  # (B, H, W) of the recorded batch
        self.sizes: list[HW] | None = None

    def record(self, batch: torch.Tensor, sizes: Sequence[Sequence[int]]) -> None:
        """Remembers the real (height, width) of each image of the padded (B, C, H, W) ``batch``."""
        self.batch_hw = (int(batch.shape[0]), int(batch.shape[-2]), int(batch.shape[-1]))
        self.sizes = [(int(s[0]), int(s[1])) for s in sizes]

    def clear(self) -> None:
        self.batch_hw = self.sizes = None

    def for_input(self, x: Any) -> list[HW] | None:
        """The recorded sizes when ``x`` is the recorded batch (a 4-D tensor of its batch size and
        spatial size), else None."""
        if self.sizes is None or not isinstance(x, torch.Tensor) or x.ndim != 4:
            return None
        return self.sizes if (int(x.shape[0]), int(x.shape[-2]), int(x.shape[-1])) == self.batch_hw else None
