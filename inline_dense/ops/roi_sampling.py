"""RoIAlign's sampling rule, as mmcv's and torchvision's CPU kernels compute it (the same float
operations in the same order, so that sums built on it match theirs bit for bit): a box's start and
size on the feature map, its samples per bin, and the bilinear rule at a sample point."""
import torch
from torch import Tensor


def roi_box(rois: Tensor, spatial_scale: float, aligned: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``start_h, start_w, roi_h, roi_w`` on the feature map of boxes ``rois`` (..., 5) given as batch
    index, x1, y1, x2, y2 in input pixels: each of shape ``rois.shape[:-1]``.

    ``aligned`` shifts by half a pixel; without it (mmcv's legacy mode) a box is at least one pixel.
    """
    offset = 0.5 if aligned else 0.0
    start_w = rois[..., 1] * spatial_scale - offset
    start_h = rois[..., 2] * spatial_scale - offset
    roi_w = rois[..., 3] * spatial_scale - offset - start_w
    roi_h = rois[..., 4] * spatial_scale - offset - start_h
    if not aligned:
        roi_w = roi_w.clamp(min=1.0)
        roi_h = roi_h.clamp(min=1.0)
    return start_h, start_w, roi_h, roi_w


def sample_grid(bin_h: Tensor, bin_w: Tensor, sampling_ratio: int) -> tuple[Tensor, Tensor]:
    """Samples per bin along each axis (int64, the shape of ``bin_h``): ``sampling_ratio``, or with 0
    (adaptive) about one per feature pixel, ``ceil`` of the bin's size."""
    if sampling_ratio > 0:
        return (torch.full_like(bin_h, sampling_ratio, dtype=torch.long),
                torch.full_like(bin_w, sampling_ratio, dtype=torch.long))
    return torch.ceil(bin_h).long(), torch.ceil(bin_w).long()


def bilinear_axis(pos: Tensor, size: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """One axis of the bilinear rule at coordinates ``pos`` on an axis of ``size`` pixels: the low and
    high pixel (int64, within the map), the weights of each (``1 - frac``, ``frac``), and whether the
    point reads the map at all (more than one pixel outside it reads nothing; within that, the border)."""
    inside = (pos >= -1.0) & (pos <= size)
    pos = pos.clamp(min=0)
    low = pos.long()  # truncation: floor, as pos >= 0
    top = low >= size - 1
    low = low.clamp(max=size - 1)
    pos = torch.where(top, low.to(pos.dtype), pos)
    high = torch.where(top, low, low + 1)
    frac = pos - low
    return low, high, 1.0 - frac, frac, inside


def bilinear_corners(y: Tensor, x: Tensor, height: int, width: int) -> tuple[Tensor, ...]:
    """The bilinear rule at points (y, x): ``y_low, y_high, x_low, x_high`` (int64) and the weights
    ``w1..w4`` of the corners (yl, xl), (yl, xh), (yh, xl), (yh, xh), 0 at points that read nothing."""
    y_low, y_high, hy, ly, y_in = bilinear_axis(y, height)
    x_low, x_high, hx, lx, x_in = bilinear_axis(x, width)
    on_map = y_in & x_in
    zero = y.new_zeros(())
    weights = [torch.where(on_map, w, zero) for w in (hy * hx, hy * lx, ly * hx, ly * lx)]
    return (y_low, y_high, x_low, x_high, *weights)

