"""Learned position embeddings on a grid of any size: resized (``mode``: bilinear as PVT, or bicubic
with antialiasing as timm's ViTs, both align_corners=False) to the input's grid, and in a padded batch
to each image's own grid, so that padding never moves an image's positions."""

import torch
import torch.nn.functional as F

from ..typing import HW
from .padding import valid_grid_sizes
from .tensor_utils import traced
from .tracing import fx_wrap


def resize_pos_grid(pos_embed: torch.Tensor, src_hw: HW, dst_hw: HW, mode: str = 'bilinear') -> torch.Tensor:
    """(1, h0*w0, C) embedding of a ``src_hw`` grid -> (1, C, h, w) map, align_corners=False.

    ``mode`` 'bilinear', or 'bicubic': antialiased and in float32, as timm's
    ``resample_abs_pos_embed`` (its default for ViTs)."""
    c = pos_embed.shape[-1]
    grid = pos_embed.reshape(1, src_hw[0], src_hw[1], c).permute(0, 3, 1, 2)
    if mode == 'bicubic':
        out = F.interpolate(grid.float(), size=dst_hw, mode='bicubic', align_corners=False, antialias=True)
        return out.to(grid.dtype)
    return F.interpolate(grid, size=dst_hw, mode='bilinear', align_corners=False)


def resize_pos_embed(pos_embed: torch.Tensor, src_hw: HW, dst_hw: HW, mode: str = 'bilinear') -> torch.Tensor:
    """(1, h0*w0, C) embedding of a ``src_hw`` grid -> (1, h*w, C) (``mode`` as ``resize_pos_grid``)."""
    if tuple(src_hw) == tuple(dst_hw):
        return pos_embed
    return resize_pos_grid(pos_embed, src_hw, dst_hw, mode).flatten(2).transpose(1, 2)


@fx_wrap
def stage_position(pos_embed: torch.Tensor, pos_hw: HW, hw: HW, valid_hw: list[HW] | None,
                   stride: int, mode: str = 'bilinear') -> torch.Tensor:
    """The (1, h0*w0, C) embedding of the ``pos_hw`` grid resized to the ``hw`` grid: (1, h*w, C);
    for a padded batch (``valid_hw``, real image sizes in pixels, at this ``stride``), (B, h*w, C)
    with each image's embedding resized to its own grid at the top left, as it would be alone:
    padding must not move an image's positions. ``mode`` as ``resize_pos_grid``."""
    sizes = valid_grid_sizes(valid_hw, hw, stride)
    if sizes is None:
        return resize_pos_embed(pos_embed, pos_hw, hw, mode)
    c = pos_embed.shape[-1]
    if traced():  # zero-padded to the grid, not written into a slice of it: either would guard the graph on the sizes
        grids = [F.pad(resize_pos_grid(pos_embed, pos_hw, size, mode)[0].permute(1, 2, 0),
                       (0, 0, 0, hw[1] - size[1], 0, hw[0] - size[0])) for size in sizes]
        return torch.stack(grids).view(len(sizes), hw[0] * hw[1], c)
    pos = pos_embed.new_zeros(len(sizes), hw[0], hw[1], c)
    resized: dict[str, torch.Tensor] = {}  # by 'h,w' (TorchScript keys no tuples)
    for i, size in enumerate(sizes):
        key = f'{size[0]},{size[1]}'
        if key not in resized:  # (h_i, w_i, C); no flatten and view back: traced, each costs seconds
            resized[key] = resize_pos_grid(pos_embed, pos_hw, size, mode)[0].permute(1, 2, 0)
        pos[i, :size[0], :size[1]] = resized[key]
    return pos.view(len(sizes), hw[0] * hw[1], c)
