"""The gradient of RoIAlign's average pooling on CPU, as a few vector ops instead of torchvision's
per-channel loop, with the same sums bit for bit.

torchvision's CPU backward (the same loop as mmcv's CPU kernel) walks RoI, channel, bin and sample,
recomputing each sample's bilinear weights once per channel and adding four terms
``grad * w / count`` into the feature gradient. Here each sample's weights are computed once, the
terms of all channels are made by a gather and two in-place products, and ``index_add_`` (a serial
loop over rows on CPU) adds them in torchvision's order: RoI, bin, sample, corner. Every element of
the gradient therefore receives the same float terms in the same order, so the result is identical,
not merely close; on the toy Mask R-CNN's calls it took a third of the time.
"""
import torch
from torch import Tensor

from .roi_sampling import bilinear_axis, roi_box, sample_grid

# Samples whose geometry is computed at once (bounds the index and weight tables: ~100 bytes each),
# and rows of terms made and added at once (2048 samples x 4 corners x C floats: cache-sized at C=64).
GEOMETRY_SAMPLES = 1 << 16
TERM_SAMPLES = 2048
# Below this many (bin x channel) outputs torchvision's loop is faster than the fixed cost of the
# vector ops (a few hundred microseconds); both give the same sums.
MIN_VECTOR_OUTPUTS = 1 << 15


def _roi_grids(rois: Tensor, spatial_scale: float, pooled_h: int, pooled_w: int, sampling_ratio: int,
               aligned: bool) -> tuple[Tensor, Tensor]:
    """Per RoI (K,): the float geometry (K, 6) ``start_h, bin_h, grid_h, start_w, bin_w, grid_w`` and
    the integer grid (K, 2) ``grid_h, grid_w`` (samples per bin along each axis)."""
    start_h, start_w, roi_h, roi_w = roi_box(rois, spatial_scale, aligned)
    bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
    grid = torch.stack(sample_grid(bin_h, bin_w, sampling_ratio), dim=1)
    geometry = torch.stack([start_h, bin_h, grid[:, 0].to(rois.dtype), start_w, bin_w,
                            grid[:, 1].to(rois.dtype)], dim=1)
    return geometry, grid


def _sample_axis(start: Tensor, bin_size: Tensor, grid: Tensor, bin_index: Tensor, sample: Tensor,
                 size: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The bilinear rule along one axis at sample ``sample`` of bin ``bin_index`` (see bilinear_axis)."""
    pos = start + bin_index * bin_size + (sample.to(start.dtype) + 0.5) * bin_size / grid
    return bilinear_axis(pos, size)


def _terms(rois: Tensor, geometry: Tensor, grid: Tensor, first_sample: Tensor, lo: int, hi: int,
           pooled: tuple[int, int], shape: tuple[int, int]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Samples ``lo:hi`` of the walk (RoI, bin, sample row, sample column), less those off the map:
    for each of their four corners in order the flat pixel row (batch * H * W + y * W + x), the
    bilinear weight, the bin row of the (K * PH * PW, C) gradient, and the sample count of the bin."""
    pooled_h, pooled_w = pooled
    height, width = shape
    index = torch.arange(lo, hi)
    roi = torch.searchsorted(first_sample, index, right=True) - 1
    geo = geometry.index_select(0, roi)
    grid_hw = grid.index_select(0, roi)
    per_bin = grid_hw[:, 0] * grid_hw[:, 1]
    local = index - first_sample.index_select(0, roi)
    bin_index = torch.div(local, per_bin, rounding_mode='floor')
    in_bin = local - bin_index * per_bin
    iy = torch.div(in_bin, grid_hw[:, 1], rounding_mode='floor')
    ix = in_bin - iy * grid_hw[:, 1]
    ph = torch.div(bin_index, pooled_w, rounding_mode='floor')
    pw = bin_index - ph * pooled_w
    y_low, y_high, hy, ly, y_in = _sample_axis(geo[:, 0], geo[:, 1], geo[:, 2], ph, iy, height)
    x_low, x_high, hx, lx, x_in = _sample_axis(geo[:, 3], geo[:, 4], geo[:, 5], pw, ix, width)
    base = rois[:, 0].long().index_select(0, roi) * (height * width)
    rows = torch.stack([base + y_low * width + x_low, base + y_low * width + x_high,
                        base + y_high * width + x_low, base + y_high * width + x_high], dim=1)
    weights = torch.stack([hy * hx, hy * lx, ly * hx, ly * lx], dim=1)
    bins = roi * (pooled_h * pooled_w) + bin_index
    count = per_bin.clamp(min=1).to(geometry.dtype)
    on_map = y_in & x_in
    if not bool(on_map.all()):  # torchvision adds nothing for these (not 0 * grad: NaN stays out)
        rows, weights, bins, count = rows[on_map], weights[on_map], bins[on_map], count[on_map]
    return (rows.reshape(-1), weights.reshape(-1, 1), bins.repeat_interleave(4),
            count.repeat_interleave(4)[:, None])


def roi_align_avg_backward(grad_output: Tensor, rois: Tensor, spatial_scale: float, sampling_ratio: int,
                           aligned: bool, input_shape: tuple[int, int, int, int]) -> Tensor:
    """The features' gradient (B, C, H, W) of average RoIAlign on CPU, equal to torchvision's
    ``_roi_align_backward``.

    Args:
        grad_output: (K, C, PH, PW) the pooled output's gradient, float32 or float64.
        rois: (K, 5) batch index, x1, y1, x2, y2 in input pixels, valid (checked by the caller).
        input_shape: (B, C, H, W) of the features.
    """
    batch, channels, height, width = input_shape
    num_rois, _, pooled_h, pooled_w = grad_output.shape
    rois = rois.to(grad_output.dtype)
    if grad_output.device.type != 'cpu' or num_rois * pooled_h * pooled_w * channels < MIN_VECTOR_OUTPUTS:
        return torch.ops.torchvision._roi_align_backward(
            grad_output, rois, float(spatial_scale), pooled_h, pooled_w, batch, channels, height, width,
            int(sampling_ratio), bool(aligned))
    geometry, grid = _roi_grids(rois, float(spatial_scale), pooled_h, pooled_w, int(sampling_ratio), bool(aligned))
    samples = pooled_h * pooled_w * grid[:, 0] * grid[:, 1]
    first_sample = torch.cumsum(samples, 0) - samples
    total = int(samples.sum())
    bins = grad_output.permute(0, 2, 3, 1).reshape(num_rois * pooled_h * pooled_w, channels)
    grad = grad_output.new_zeros(batch * height * width, channels)
    buffer = grad_output.new_empty(4 * min(TERM_SAMPLES, max(total, 1)), channels)
    for lo in range(0, total, GEOMETRY_SAMPLES):
        rows, weights, bin_rows, count = _terms(rois, geometry, grid, first_sample, lo,
                                                min(lo + GEOMETRY_SAMPLES, total), (pooled_h, pooled_w),
                                                (height, width))
        for a in range(0, rows.numel(), 4 * TERM_SAMPLES):
            b = min(a + 4 * TERM_SAMPLES, rows.numel())
            terms = buffer[:b - a]
            torch.index_select(bins, 0, bin_rows[a:b], out=terms)
            terms.mul_(weights[a:b]).div_(count[a:b])  # (grad * w) / count: torchvision's rounding
            grad.index_add_(0, rows[a:b], terms)
    return grad.view(batch, height, width, channels).permute(0, 3, 1, 2)
