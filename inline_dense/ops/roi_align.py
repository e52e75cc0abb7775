"""mmcv's ``roi_align_forward`` / ``roi_align_backward`` for the stand-in :mod:`inline_dense.ops.ext`:
``pool_mode`` avg through torchvision's ``roi_align`` kernels (the same sampling as mmcv's), its CPU
gradient through :mod:`.roi_align_avg_grad` (the same sums, faster); max in plain torch, with mmcv's
bilinear sampling, its first-maximum rule and its argmax coordinates."""
import math

import torch
import torchvision  # noqa: F401  (registers torch.ops.torchvision.*)
from torch import Tensor

from .checks import OpInputError, check_float, check_out, check_same_device, kernel_dtype, require
from .roi_align_avg_grad import roi_align_avg_backward
from .roi_sampling import bilinear_corners, roi_box, sample_grid


def _check_rois(op: str, rois: Tensor, batch: int) -> None:
    """RoIs (K, 5): an integral batch index in [0, batch), then finite x1, y1, x2, y2."""
    require(rois.dim() == 2 and rois.shape[1] == 5,
            f'{op}: rois must be (K, 5) rows of (batch index, x1, y1, x2, y2), got shape {tuple(rois.shape)}; '
            'prepend the image index to each box (mmdet: bbox2roi)')
    check_float(op, 'rois', rois)
    if rois.shape[0] == 0:
        return
    index = rois[:, 0]
    bad_index = (index < 0) | (index >= batch) | (index != index.floor())
    bad_box = ~torch.isfinite(rois[:, 1:]).all(dim=1)
    if bool((bad_index | bad_box).any()):  # one device sync for both checks
        row = int((bad_index | bad_box).nonzero()[0, 0])
        if bool(bad_index[row]):
            raise OpInputError(f'{op}: RoI {row} has batch index {float(index[row])!r}, but the features hold '
                               f'{batch} image(s); the first column of rois must be an integer in [0, {batch})')
        raise OpInputError(f'{op}: RoI {row} has a non-finite coordinate {rois[row, 1:].tolist()}; '
                           'the boxes come from a diverged model or broken annotations: check the losses and data')


def _check_roi_align_args(op: str, aligned_height: int, aligned_width: int, spatial_scale: float,
                          sampling_ratio: int, pool_mode: int) -> None:
    require(int(aligned_height) > 0 and int(aligned_width) > 0,
            f'{op}: output_size must be positive, got ({aligned_height}, {aligned_width})')
    require(math.isfinite(float(spatial_scale)) and float(spatial_scale) > 0,
            f'{op}: spatial_scale must be a positive finite number, got {spatial_scale}')
    require(int(sampling_ratio) >= 0, f'{op}: sampling_ratio must be >= 0 (0: adaptive), got {sampling_ratio}')
    require(pool_mode in (0, 1), f"{op}: pool_mode must be 0 (max) or 1 (avg), got {pool_mode}; "
            "mmcv.ops.roi_align takes 'max' or 'avg'")


# Most bilinear samples one RoI may take per channel at sampling_ratio=0 (adaptive: about one per
# feature pixel it covers): 2**24 is a 4096 x 4096-pixel box on the feature map, far past any image.
MAX_ROI_SAMPLES = 1 << 24


def _check_roi_boxes(op: str, rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
                     sampling_ratio: int, aligned: bool) -> None:
    """Boxes the kernels can sample: with ``aligned`` none inverted (mmcv's kernel refuses such a box
    in both pool modes; torchvision's avg returned zeros), and at ``sampling_ratio=0`` none so large
    that its adaptive sampling grid would take hours or a terabyte (refused before anything is made)."""
    if rois.shape[0] == 0:
        return
    box = rois[:, 1:].double() * float(spatial_scale)
    width, height = box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]
    inverted = (width < 0) | (height < 0) if aligned else torch.zeros_like(width, dtype=torch.bool)
    if not aligned:  # mmcv's legacy mode: at least one pixel
        width, height = width.clamp(min=1.0), height.clamp(min=1.0)
    samples = ((height / pooled_h).ceil() * (width / pooled_w).ceil() * pooled_h * pooled_w if sampling_ratio == 0
               else torch.zeros_like(width))
    huge = samples > MAX_ROI_SAMPLES
    if bool((inverted | huge).any()):  # one device sync for both checks
        row = int((inverted | huge).nonzero()[0, 0])
        coords = rois[row, 1:].tolist()
        if bool(inverted[row]):
            raise OpInputError(f'{op}: RoI {row} {coords} is inverted (x2 < x1 or y2 < y1), which aligned=True '
                               'cannot sample (mmcv refuses it too); give boxes as (x1, y1, x2, y2) with x1 <= x2, '
                               'y1 <= y2')
        raise OpInputError(f'{op}: RoI {row} {coords} spans {float(width[row]):.3g} x {float(height[row]):.3g} '
                           f'feature pixels, {float(samples[row]):.3g} samples per channel at sampling_ratio=0; '
                           'clip the boxes to the image (mmdet: clip_border) or pass a sampling_ratio > 0')


def _check_roi_align_call(op: str, maps: tuple[str, Tensor], pooled: tuple[str, Tensor], rois: Tensor,
                          aligned_height: int, aligned_width: int, spatial_scale: float, sampling_ratio: int,
                          pool_mode: int, aligned: bool) -> None:
    """What both directions of roi_align check: ``maps`` (B, C, H, W) the features (forward) or their
    gradient (backward), ``pooled`` (K, C, PH, PW) the output or its gradient, ``rois`` (K, 5)."""
    (maps_name, maps_t), (pooled_name, pooled_t) = maps, pooled
    require(maps_t.dim() == 4, f'{op}: {maps_name} must be (B, C, H, W), got shape {tuple(maps_t.shape)}')
    check_same_device(op, maps, ('rois', rois), pooled)
    _check_roi_align_args(op, aligned_height, aligned_width, spatial_scale, sampling_ratio, pool_mode)
    _check_rois(op, rois, maps_t.shape[0])
    _check_roi_boxes(op, rois, aligned_height, aligned_width, spatial_scale, int(sampling_ratio), bool(aligned))
    check_out(op, pooled_name, pooled_t, (rois.shape[0], maps_t.shape[1], aligned_height, aligned_width))


def roi_align_forward(input: Tensor, rois: Tensor, output: Tensor, argmax_y: Tensor, argmax_x: Tensor, *,
                      aligned_height: int, aligned_width: int, spatial_scale: float, sampling_ratio: int,
                      pool_mode: int, aligned: bool) -> None:
    """Fills ``output`` (K, C, PH, PW), and for max pooling ``argmax_y`` / ``argmax_x``.

    Args:
        input: (B, C, H, W) features.
        rois: (K, 5) batch index, x1, y1, x2, y2 in input pixels.
        pool_mode: 0 max, 1 avg (mmcv's codes).
    """
    op = 'roi_align'
    check_float(op, 'input', input)
    _check_roi_align_call(op, ('input', input), ('output', output), rois, aligned_height, aligned_width,
                          spatial_scale, sampling_ratio, pool_mode, aligned)
    if rois.numel() == 0:
        return
    input = input.to(kernel_dtype(input))
    if pool_mode == 1:
        out = torch.ops.torchvision.roi_align(input, rois.to(input.dtype), float(spatial_scale), aligned_height,
                                              aligned_width, int(sampling_ratio), bool(aligned))
        output.copy_(out)
        return
    out, ys, xs = _roi_align_max(input, rois, aligned_height, aligned_width, float(spatial_scale),
                                 int(sampling_ratio), bool(aligned))
    output.copy_(out)
    argmax_y.copy_(ys)
    argmax_x.copy_(xs)


def roi_align_backward(grad_output: Tensor, rois: Tensor, argmax_y: Tensor, argmax_x: Tensor, grad_input: Tensor,
                       *, aligned_height: int, aligned_width: int, spatial_scale: float, sampling_ratio: int,
                       pool_mode: int, aligned: bool) -> None:
    """Adds the gradient w.r.t. the features into ``grad_input`` (B, C, H, W)."""
    op = 'roi_align (backward)'
    check_float(op, 'grad_output', grad_output)
    _check_roi_align_call(op, ('grad_input', grad_input), ('grad_output', grad_output), rois, aligned_height,
                          aligned_width, spatial_scale, sampling_ratio, pool_mode, aligned)
    if rois.numel() == 0:
        return
    batch, channels, height, width = grad_input.shape
    grad_output = grad_output.to(kernel_dtype(grad_output))
    if pool_mode == 1:
        grad_input.add_(roi_align_avg_backward(grad_output, rois, spatial_scale, int(sampling_ratio), bool(aligned),
                                               (batch, channels, height, width)))
        return
    if grad_input.dtype == grad_output.dtype:
        _roi_align_max_backward(grad_output, rois, argmax_y, argmax_x, grad_input)
    else:
        grad = torch.zeros_like(grad_input, dtype=grad_output.dtype)
        _roi_align_max_backward(grad_output, rois, argmax_y.to(grad.dtype), argmax_x.to(grad.dtype), grad)
        grad_input.add_(grad)


def _roi_align_max(input: Tensor, rois: Tensor, pooled_h: int, pooled_w: int, spatial_scale: float,
                   sampling_ratio: int, aligned: bool) -> tuple[Tensor, Tensor, Tensor]:
    """Max pooling over each bin's bilinear samples, as mmcv's kernel: (K, C, PH, PW) values and
    the (y, x) sample coordinates of the first maximum (-1 where a bin has no sample)."""
    num_rois, channels = rois.shape[0], input.shape[1]
    height, width = input.shape[-2:]
    out = input.new_full((num_rois, channels, pooled_h, pooled_w), -10000.0)
    arg_y = input.new_full(out.shape, -1.0)
    arg_x = input.new_full(out.shape, -1.0)
    rois = rois.to(input.dtype)
    for k in range(num_rois):
        roi = rois[k]
        start_h, start_w, roi_h, roi_w = roi_box(roi, spatial_scale, aligned)
        bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
        grid_h, grid_w = (int(g) for g in sample_grid(bin_h, bin_w, sampling_ratio))
        if grid_h == 0 or grid_w == 0:
            continue
        dev, dt = input.device, input.dtype
        ph = torch.arange(pooled_h, device=dev, dtype=dt)[:, None]
        pw = torch.arange(pooled_w, device=dev, dtype=dt)[:, None]
        iy = torch.arange(grid_h, device=dev, dtype=dt)[None] + 0.5
        ix = torch.arange(grid_w, device=dev, dtype=dt)[None] + 0.5
        ys = (start_h + ph * bin_h + iy * bin_h / grid_h)  # (PH, GH)
        xs = (start_w + pw * bin_w + ix * bin_w / grid_w)  # (PW, GW)
        y = ys[:, :, None, None].expand(pooled_h, grid_h, pooled_w, grid_w)
        x = xs[None, None].expand(pooled_h, grid_h, pooled_w, grid_w)
        yl, yh, xl, xh, w1, w2, w3, w4 = bilinear_corners(y, x, height, width)
        feat = input[int(roi[0])]  # (C, H, W)
        vals = w1 * feat[:, yl, xl] + w2 * feat[:, yl, xh] + w3 * feat[:, yh, xl] + w4 * feat[:, yh, xh]
        # (C, PH, GH, PW, GW) -> (C, PH, PW, GH*GW); the first maximum wins, as in mmcv's loop
        vals = vals.permute(0, 1, 3, 2, 4).reshape(channels, pooled_h, pooled_w, grid_h * grid_w)
        best = vals.max(dim=-1, keepdim=True).values
        first = (vals == best).to(torch.int8).argmax(dim=-1)
        best = best.squeeze(-1)
        take = best > -10000.0
        out[k] = torch.where(take, best, out[k])
        sy = y.permute(0, 2, 1, 3).reshape(pooled_h, pooled_w, grid_h * grid_w)
        sx = x.permute(0, 2, 1, 3).reshape(pooled_h, pooled_w, grid_h * grid_w)
        arg_y[k] = torch.where(take, sy.expand(channels, -1, -1, -1).gather(-1, first[..., None]).squeeze(-1), -1.0)
        arg_x[k] = torch.where(take, sx.expand(channels, -1, -1, -1).gather(-1, first[..., None]).squeeze(-1), -1.0)
    return out, arg_y, arg_x


def _roi_align_max_backward(grad_output: Tensor, rois: Tensor, arg_y: Tensor, arg_x: Tensor,
                            grad_input: Tensor) -> None:
    """Scatters each bin's gradient onto the 4 pixels around its argmax sample."""
    height, width = grad_input.shape[-2:]
    channels = grad_input.shape[1]
    has = arg_y != -1.0
    yl, yh, xl, xh, w1, w2, w3, w4 = bilinear_corners(arg_y, arg_x, height, width)
    batch_idx = rois[:, 0].long()[:, None, None, None].expand_as(arg_y)
    chan = torch.arange(channels, device=arg_y.device)[None, :, None, None].expand_as(arg_y)
    # One accumulate, bin by bin and corner by corner: mmcv's order of additions, so sums match.
    rows = torch.stack([yl, yl, yh, yh], dim=-1)[has]
    cols = torch.stack([xl, xh, xl, xh], dim=-1)[has]
    vals = (grad_output[..., None] * torch.stack([w1, w2, w3, w4], dim=-1))[has]
    grad_input.index_put_((batch_idx[has][:, None].expand_as(rows).reshape(-1),
                           chan[has][:, None].expand_as(rows).reshape(-1), rows.reshape(-1), cols.reshape(-1)),
                          vals.reshape(-1), accumulate=True)


