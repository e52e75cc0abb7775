"""A stand-in for mmcv's compiled ``mmcv._ext``, built on torchvision's ops and plain torch.

mmcv-lite ships every ``mmcv.ops`` Python file but not the compiled extension they load when
imported (``ext_loader.load_ext('_ext', [...])``). When no compiled ``mmcv._ext`` exists,
:mod:`inline_dense_mmcv_hook` loads THIS FILE as ``mmcv._ext``. It follows the compiled
extension's calling convention: the same function names and keyword arguments, outputs written
into the tensors passed in. It runs on CPU and CUDA alike (torchvision ships both kernels).

Served:
- ``nms``: ``torchvision.ops.nms`` (``offset=1``, the legacy +1 box size, by widening the boxes).
- ``roi_align_forward`` / ``roi_align_backward``: ``pool_mode`` avg through torchvision's
  ``roi_align`` kernels (the same sampling as mmcv's); max in plain torch, with mmcv's
  bilinear sampling, its first-maximum rule and its argmax coordinates.
- ``sigmoid_focal_loss_*`` and ``softmax_focal_loss_*``: plain torch, gradients by autograd.
- ``ms_deform_attn_forward`` / ``ms_deform_attn_backward`` (DINO, Deformable DETR, Mask2Former):
  the bilinear corners of every level at its own size, gathered by one ``embedding_bag`` (see
  :func:`_ms_deform_attn`); gradients by hand (:func:`_ms_deform_attn_grads`).

Every served op checks its inputs first (shapes, dtypes, devices, RoI batch indices and class
targets in range, finite boxes) and raises :class:`OpInputError`, one line naming the argument
and the fix, where compiled mmcv would read out of bounds or return garbage.

Any other op that the installed ``mmcv.ops`` loads (the names in its ``load_ext`` calls) resolves
to a function that raises :class:`MissingCompiledOpError` when called (``load_ext`` only checks
that the names exist), naming the op and how to get compiled ops. A name mmcv never asks for is
an ``AttributeError``, as on the compiled extension.

This file imports nothing from ``inline_dense``: it is loaded while mmdet or mmseg are half
imported, and importing the package (which registers into their registries) would then cycle.
"""
import functools
import importlib.util
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
import torchvision  # registers torch.ops.torchvision.*
from torch import Tensor

IS_STAND_IN = True
"""Marks this module as inline_dense's stand-in (the compiled ``mmcv._ext`` has no such name)."""

CALLS: Counter = Counter()
"""How often each op was called in this process (a cheap record of what a run really uses)."""

SERVED = ('nms', 'roi_align_forward', 'roi_align_backward', 'sigmoid_focal_loss_forward',
          'sigmoid_focal_loss_backward', 'softmax_focal_loss_forward', 'softmax_focal_loss_backward',
          'ms_deform_attn_forward', 'ms_deform_attn_backward')

HOW_TO_GET_COMPILED_OPS = (
    'Install mmcv 2.1.0 with its compiled ops instead of mmcv-lite: '
    '`MMCV=full bash tools/setup_env.sh` (compiles mmcv once, ~10-30 min; CUDA ops need a CUDA '
    "toolkit matching torch's), or `pip uninstall mmcv-lite && mim install mmcv==2.1.0`.")


class MissingCompiledOpError(RuntimeError):
    """An mmcv op that needs mmcv's compiled extension, which is not installed."""


class OpInputError(ValueError):
    """A served op was given inputs it cannot compute on (wrong shape, dtype, device or range)."""


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise OpInputError(message)


def _check_float(op: str, name: str, t: Tensor) -> None:
    _require(t.is_floating_point(), f'{op}: {name} must be a floating-point tensor, got {t.dtype}; '
             f'convert it with .float()')


def _check_same_device(op: str, first: tuple[str, Tensor], *others: tuple[str, Tensor]) -> None:
    for name, t in others:
        _require(t.device == first[1].device, f'{op}: {name} is on {t.device} but {first[0]} is on '
                 f'{first[1].device}; move both to the same device')


def _check_rois(op: str, rois: Tensor, batch: int) -> None:
    """RoIs (K, 5): an integral batch index in [0, batch), then finite x1, y1, x2, y2."""
    _require(rois.dim() == 2 and rois.shape[1] == 5,
             f'{op}: rois must be (K, 5) rows of (batch index, x1, y1, x2, y2), got shape {tuple(rois.shape)}; '
             'prepend the image index to each box (mmdet: bbox2roi)')
    _check_float(op, 'rois', rois)
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


def _check_out(op: str, name: str, t: Tensor, shape: tuple[int, ...]) -> None:
    _require(tuple(t.shape) == tuple(shape), f'{op}: {name} must have shape {tuple(shape)}, got {tuple(t.shape)}')


def _check_roi_align_args(op: str, aligned_height: int, aligned_width: int, spatial_scale: float,
                          sampling_ratio: int, pool_mode: int) -> None:
    _require(int(aligned_height) > 0 and int(aligned_width) > 0,
             f'{op}: output_size must be positive, got ({aligned_height}, {aligned_width})')
    _require(math.isfinite(float(spatial_scale)) and float(spatial_scale) > 0,
             f'{op}: spatial_scale must be a positive finite number, got {spatial_scale}')
    _require(int(sampling_ratio) >= 0, f'{op}: sampling_ratio must be >= 0 (0: adaptive), got {sampling_ratio}')
    _require(pool_mode in (0, 1), f"{op}: pool_mode must be 0 (max) or 1 (avg), got {pool_mode}; "
             "mmcv.ops.roi_align takes 'max' or 'avg'")


def _check_focal(op: str, logits: Tensor, target: Tensor, weight: Tensor, background: bool) -> None:
    """Logits or probabilities (N, C), int64 targets (N,) in [0, C) (or [0, C] with C the
    ``background``), weight empty or (C,)."""
    _require(logits.dim() == 2, f'{op}: input must be (N, C) scores, got shape {tuple(logits.shape)}')
    max_target = logits.shape[1] if background else logits.shape[1] - 1
    _check_float(op, 'input', logits)
    _require(target.dtype == torch.long, f'{op}: target must be int64 class indices, got {target.dtype}; '
             'use target.long()')
    _require(target.dim() == 1 and target.shape[0] == logits.shape[0],
             f'{op}: target must be (N,) = ({logits.shape[0]},) to match input, got shape {tuple(target.shape)}')
    _require(weight.numel() == 0 or (weight.dim() == 1 and weight.shape[0] == logits.shape[1]),
             f'{op}: weight must be empty or one weight per class ({logits.shape[1]},), got shape '
             f'{tuple(weight.shape)}')
    _check_same_device(op, ('input', logits), ('target', target), ('weight', weight))
    if target.numel() and bool(((target < 0) | (target > max_target)).any()):
        bad = target[(target < 0) | (target > max_target)][0]
        raise OpInputError(f'{op}: target holds class {int(bad)}, outside [0, {max_target}] for {logits.shape[1]} '
                           "classes; check the head's num_classes against the dataset's classes")


def _missing(name: str) -> Callable:
    def op(*args, **kwargs):
        raise MissingCompiledOpError(
            f"mmcv op '{name}' needs mmcv's compiled extension (mmcv._ext), and this environment "
            f'has mmcv-lite, whose stand-in (inline_dense.ops) serves only {", ".join(SERVED)}. '
            + HOW_TO_GET_COMPILED_OPS)
    op.__name__ = name
    op.__qualname__ = name
    return op


@functools.lru_cache(maxsize=1)
def mmcv_op_names() -> frozenset:
    """The op names the installed ``mmcv.ops`` loads from ``mmcv._ext`` (its ``load_ext`` calls),
    read from its sources without importing it; empty when mmcv is not installed."""
    spec = importlib.util.find_spec('mmcv')
    names: set = set()
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for source in sorted((Path(folder) / 'ops').glob('*.py')):
            for listed in re.findall(r"load_ext\(\s*['\"]_ext['\"]\s*,\s*\[([^\]]*)\]", source.read_text('utf-8')):
                names.update(re.findall(r"['\"](\w+)['\"]", listed))
    return frozenset(names)


def __getattr__(name: str) -> Callable:
    if name in mmcv_op_names():
        return _missing(name)
    raise AttributeError(f'{__name__} (the stand-in for mmcv._ext) has no attribute {name!r}: mmcv.ops never '
                         'asks for it')


def kernel_dtype(t: Tensor) -> torch.dtype:
    """The dtype torchvision's kernels take for ``t``: they have no bfloat16 kernels, and no
    float16 ones on CPU, so those run in float32 (what autocast would pick for these ops anyway)."""
    if t.dtype == torch.bfloat16 or (t.dtype == torch.float16 and t.device.type == 'cpu'):
        return torch.float32
    return t.dtype


# --------------------------------------------------------------------------------- nms
def nms(boxes: Tensor, scores: Tensor, iou_threshold: float, offset: int = 0) -> Tensor:
    """Indices (M,) int64 of the kept boxes, by decreasing score.

    Args:
        boxes: (N, 4) x1, y1, x2, y2.
        scores: (N,).
        iou_threshold: a box is dropped when its IoU with a kept one is above this.
        offset: 1 for the legacy box size ``x2 - x1 + 1``.
    """
    CALLS['nms'] += 1
    _require(offset in (0, 1), f'nms: offset must be 0 or 1, got {offset}')
    _require(boxes.dim() == 2 and boxes.shape[1] == 4,
             f'nms: boxes must be (N, 4) rows of x1, y1, x2, y2, got shape {tuple(boxes.shape)}')
    _require(scores.dim() == 1 and scores.shape[0] == boxes.shape[0],
             f'nms: scores must be (N,) = ({boxes.shape[0]},) to match boxes, got shape {tuple(scores.shape)}')
    _check_float('nms', 'boxes', boxes)
    _check_float('nms', 'scores', scores)
    _check_same_device('nms', ('boxes', boxes), ('scores', scores))
    _require(math.isfinite(float(iou_threshold)), f'nms: iou_threshold must be finite, got {iou_threshold}')
    if boxes.numel() and not bool(torch.isfinite(boxes).all() & torch.isfinite(scores).all()):
        raise OpInputError('nms: boxes or scores hold NaN or inf; they come from a diverged model or broken '
                           'inputs: check the losses (lower the learning rate) and the checkpoint')
    work_dtype = kernel_dtype(boxes)
    boxes = boxes.to(work_dtype)
    if offset:
        boxes = torch.cat([boxes[:, :2], boxes[:, 2:] + 1], dim=1)
    return torchvision.ops.nms(boxes, scores.to(work_dtype), float(iou_threshold))


# --------------------------------------------------------------------------------- roi_align
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
    _require(maps_t.dim() == 4, f'{op}: {maps_name} must be (B, C, H, W), got shape {tuple(maps_t.shape)}')
    _check_same_device(op, maps, ('rois', rois), pooled)
    _check_roi_align_args(op, aligned_height, aligned_width, spatial_scale, sampling_ratio, pool_mode)
    _check_rois(op, rois, maps_t.shape[0])
    _check_roi_boxes(op, rois, aligned_height, aligned_width, spatial_scale, int(sampling_ratio), bool(aligned))
    _check_out(op, pooled_name, pooled_t, (rois.shape[0], maps_t.shape[1], aligned_height, aligned_width))


def roi_align_forward(input: Tensor, rois: Tensor, output: Tensor, argmax_y: Tensor, argmax_x: Tensor, *,
                      aligned_height: int, aligned_width: int, spatial_scale: float, sampling_ratio: int,
                      pool_mode: int, aligned: bool) -> None:
    """Fills ``output`` (K, C, PH, PW), and for max pooling ``argmax_y`` / ``argmax_x``.

    Args:
        input: (B, C, H, W) features.
        rois: (K, 5) batch index, x1, y1, x2, y2 in input pixels.
        pool_mode: 0 max, 1 avg (mmcv's codes).
    """
    CALLS['roi_align_forward'] += 1
    op = 'roi_align'
    _check_float(op, 'input', input)
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
    CALLS['roi_align_backward'] += 1
    op = 'roi_align (backward)'
    _check_float(op, 'grad_output', grad_output)
    _check_roi_align_call(op, ('grad_input', grad_input), ('grad_output', grad_output), rois, aligned_height,
                          aligned_width, spatial_scale, sampling_ratio, pool_mode, aligned)
    if rois.numel() == 0:
        return
    batch, channels, height, width = grad_input.shape
    grad_output = grad_output.to(kernel_dtype(grad_output))
    if pool_mode == 1:
        grad = torch.ops.torchvision._roi_align_backward(
            grad_output, rois.to(grad_output.dtype), float(spatial_scale), aligned_height, aligned_width, batch,
            channels, height, width, int(sampling_ratio), bool(aligned))
        grad_input.add_(grad)
        return
    if grad_input.dtype == grad_output.dtype:
        _roi_align_max_backward(grad_output, rois, argmax_y, argmax_x, grad_input)
    else:
        grad = torch.zeros_like(grad_input, dtype=grad_output.dtype)
        _roi_align_max_backward(grad_output, rois, argmax_y.to(grad.dtype), argmax_x.to(grad.dtype), grad)
        grad_input.add_(grad)


def _bilinear_corners(y: Tensor, x: Tensor, height: int, width: int) -> tuple[Tensor, ...]:
    """mmcv's bilinear sampling rule at points (y, x): corner indices, weights and validity.

    Points more than one pixel outside the map read 0; points in [-1, 0) read the border.
    Returns y_low, y_high, x_low, x_high (int64) and w1..w4 (for (yl,xl), (yl,xh), (yh,xl), (yh,xh)).
    """
    valid = (y >= -1.0) & (y <= height) & (x >= -1.0) & (x <= width)
    y = y.clamp(min=0)
    x = x.clamp(min=0)
    y_low = y.floor().long()
    x_low = x.floor().long()
    y_top = y_low >= height - 1
    x_top = x_low >= width - 1
    y_low = torch.where(y_top, height - 1, y_low)
    x_low = torch.where(x_top, width - 1, x_low)
    y = torch.where(y_top, y_low.to(y.dtype), y)
    x = torch.where(x_top, x_low.to(x.dtype), x)
    y_high = torch.where(y_top, y_low, y_low + 1)
    x_high = torch.where(x_top, x_low, x_low + 1)
    ly = y - y_low
    lx = x - x_low
    hy = 1.0 - ly
    hx = 1.0 - lx
    zero = torch.zeros((), dtype=y.dtype, device=y.device)
    weights = [torch.where(valid, w, zero) for w in (hy * hx, hy * lx, ly * hx, ly * lx)]
    return (y_low.clamp(0, height - 1), y_high.clamp(0, height - 1), x_low.clamp(0, width - 1),
            x_high.clamp(0, width - 1), *weights)


def _roi_box(roi: Tensor, spatial_scale: float, aligned: bool) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    offset = 0.5 if aligned else 0.0
    start_w = roi[1] * spatial_scale - offset
    start_h = roi[2] * spatial_scale - offset
    roi_w = roi[3] * spatial_scale - offset - start_w
    roi_h = roi[4] * spatial_scale - offset - start_h
    if not aligned:  # mmcv's legacy mode: at least one pixel (aligned: inverted boxes are refused before)
        roi_w = roi_w.clamp(min=1.0)
        roi_h = roi_h.clamp(min=1.0)
    return start_h, start_w, roi_h, roi_w


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
        start_h, start_w, roi_h, roi_w = _roi_box(roi, spatial_scale, aligned)
        bin_h, bin_w = roi_h / pooled_h, roi_w / pooled_w
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(float(roi_h) / pooled_h)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(float(roi_w) / pooled_w)
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
        yl, yh, xl, xh, w1, w2, w3, w4 = _bilinear_corners(y, x, height, width)
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
    yl, yh, xl, xh, w1, w2, w3, w4 = _bilinear_corners(arg_y, arg_x, height, width)
    batch_idx = rois[:, 0].long()[:, None, None, None].expand_as(arg_y)
    chan = torch.arange(channels, device=arg_y.device)[None, :, None, None].expand_as(arg_y)
    # One accumulate, bin by bin and corner by corner: mmcv's order of additions, so sums match.
    rows = torch.stack([yl, yl, yh, yh], dim=-1)[has]
    cols = torch.stack([xl, xh, xl, xh], dim=-1)[has]
    vals = (grad_output[..., None] * torch.stack([w1, w2, w3, w4], dim=-1))[has]
    grad_input.index_put_((batch_idx[has][:, None].expand_as(rows).reshape(-1),
                           chan[has][:, None].expand_as(rows).reshape(-1), rows.reshape(-1), cols.reshape(-1)),
                          vals.reshape(-1), accumulate=True)


# --------------------------------------------------------------------------------- focal losses
def _sigmoid_focal(logits: Tensor, target: Tensor, weight: Tensor, gamma: float, alpha: float) -> Tensor:
    """Per-element sigmoid focal loss (N, C); class ``target[n]`` is positive (C means none)."""
    num_classes = logits.shape[1]
    pos = F.one_hot(target.clamp(max=num_classes), num_classes + 1)[:, :num_classes].to(logits.dtype)
    p = logits.sigmoid()
    loss = -alpha * pos * (1 - p).pow(gamma) * F.logsigmoid(logits) \
        - (1 - alpha) * (1 - pos) * p.pow(gamma) * F.logsigmoid(-logits)
    return loss * _per_sample_weight(weight, target, num_classes, logits)[:, None]


def _per_sample_weight(weight: Tensor, target: Tensor, num_classes: int, like: Tensor) -> Tensor:
    """mmcv scales sample n by ``weight[target[n]]``; background samples (target == C) keep 1."""
    if weight.numel() == 0:
        return torch.ones(target.shape, dtype=like.dtype, device=like.device)
    padded = torch.cat([weight.to(like.dtype), weight.new_ones(1, dtype=like.dtype)])
    return padded[target.clamp(max=num_classes)]


def _enter_focal(entry: str, x: Tensor, target: Tensor, weight: Tensor,
                 out: tuple[str, Tensor, tuple[int, ...]]) -> None:
    """Counts a call of the focal-loss op ``entry`` ('sigmoid_focal_loss_forward', ...) and checks its
    inputs and its output buffer ``out`` (name, tensor, expected shape); messages name the op as mmcv
    does ('sigmoid_focal_loss', 'softmax_focal_loss (backward)')."""
    CALLS[entry] += 1
    kind, direction = entry.rsplit('_', 1)
    op = kind if direction == 'forward' else f'{kind} (backward)'
    _check_focal(op, x, target, weight, background=kind.startswith('sigmoid'))
    _check_out(op, *out)


def sigmoid_focal_loss_forward(input: Tensor, target: Tensor, weight: Tensor, output: Tensor, *,
                               gamma: float, alpha: float) -> None:
    """Fills ``output`` (N, C) with the per-element loss of logits ``input`` (N, C)."""
    _enter_focal('sigmoid_focal_loss_forward', input, target, weight, ('output', output, tuple(input.shape)))
    with torch.no_grad():
        output.copy_(_sigmoid_focal(input, target, weight, gamma, alpha))


def sigmoid_focal_loss_backward(input: Tensor, target: Tensor, weight: Tensor, grad_input: Tensor, *,
                                gamma: float, alpha: float) -> None:
    """Fills ``grad_input`` (N, C) with d(loss[n, c]) / d(input[n, c])."""
    _enter_focal('sigmoid_focal_loss_backward', input, target, weight, ('grad_input', grad_input, tuple(input.shape)))
    with torch.enable_grad():
        x = input.detach().requires_grad_(True)
        grad, = torch.autograd.grad(_sigmoid_focal(x, target, weight, gamma, alpha).sum(), x)
    grad_input.copy_(grad)


def _softmax_focal(log_p: Tensor, target: Tensor, weight: Tensor, gamma: float, alpha: float) -> Tensor:
    """Per-sample softmax focal loss (N,) from log-probabilities (N, C)."""
    log_pt = log_p.gather(1, target[:, None]).squeeze(1)
    loss = -alpha * (1 - log_pt.exp()).pow(gamma) * log_pt
    return loss * _per_sample_weight(weight, target, log_p.shape[1], log_p)


def softmax_focal_loss_forward(softmax: Tensor, target: Tensor, weight: Tensor, output: Tensor, *,
                               gamma: float, alpha: float) -> None:
    """Fills ``output`` (N,) from class probabilities ``softmax`` (N, C)."""
    _enter_focal('softmax_focal_loss_forward', softmax, target, weight, ('output', output, tuple(softmax.shape[:1])))
    with torch.no_grad():
        log_p = softmax.clamp(min=torch.finfo(softmax.dtype).tiny).log()
        output.copy_(_softmax_focal(log_p, target, weight, gamma, alpha))


def softmax_focal_loss_backward(softmax: Tensor, target: Tensor, weight: Tensor, buff: Tensor,
                                grad_input: Tensor, *, gamma: float, alpha: float) -> None:
    """Fills ``grad_input`` (N, C) with the gradient w.r.t. the logits behind ``softmax``.

    log(softmax) differs from those logits by a per-row constant, which softmax ignores, so the
    gradient through it is the gradient w.r.t. the logits.
    """
    _enter_focal('softmax_focal_loss_backward', softmax, target, weight,
                 ('grad_input', grad_input, tuple(softmax.shape)))
    with torch.enable_grad():
        logits = softmax.detach().clamp(min=torch.finfo(softmax.dtype).tiny).log().requires_grad_(True)
        loss = _softmax_focal(F.log_softmax(logits, dim=1), target, weight, gamma, alpha).sum()
        grad, = torch.autograd.grad(loss, logits)
    grad_input.copy_(grad)


# --------------------------------------------------------------------------------- multi-scale deformable attention
def _check_ms_deform_attn(op: str, value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                          sampling_locations: Tensor, attention_weights: Tensor, im2col_step: int) -> None:
    """value (B, S, H, D); spatial_shapes (L, 2) int64 rows (h, w) with sum(h * w) == S;
    level_start_index (L,) int64, the exclusive cumulative sum of h * w; sampling_locations
    (B, Q, H, L, P, 2) floats; attention_weights (B, Q, H, L, P) floats, all on one device."""
    _require(value.dim() == 4, f'{op}: value must be (batch, num_keys, num_heads, head_dims), got shape '
             f'{tuple(value.shape)}')
    _check_float(op, 'value', value)
    batch, num_keys, heads, _ = value.shape
    _require(spatial_shapes.dim() == 2 and spatial_shapes.shape[1] == 2 and spatial_shapes.shape[0] > 0,
             f'{op}: spatial_shapes must be (num_levels, 2) rows of (h, w), got shape {tuple(spatial_shapes.shape)}')
    levels = spatial_shapes.shape[0]
    _require(sampling_locations.dim() == 6 and sampling_locations.shape[-1] == 2,
             f'{op}: sampling_locations must be (batch, num_queries, num_heads, num_levels, num_points, 2), '
             f'got shape {tuple(sampling_locations.shape)}')
    batch_q, queries, heads_q, levels_q, points, _ = sampling_locations.shape
    _require((batch_q, heads_q, levels_q) == (batch, heads, levels),
             f'{op}: sampling_locations {tuple(sampling_locations.shape)} must have batch {batch}, num_heads '
             f'{heads} (from value) and num_levels {levels} (from spatial_shapes)')
    _require(tuple(attention_weights.shape) == (batch, queries, heads, levels, points),
             f'{op}: attention_weights must have shape {(batch, queries, heads, levels, points)} to match '
             f'sampling_locations, got {tuple(attention_weights.shape)}')
    _check_float(op, 'sampling_locations', sampling_locations)
    _check_float(op, 'attention_weights', attention_weights)
    for name, t in (('sampling_locations', sampling_locations), ('attention_weights', attention_weights)):
        _require(t.dtype == value.dtype, f'{op}: {name} is {t.dtype} but value is {value.dtype}; '
                 'cast them to one dtype (mmcv.ops casts them to value\'s)')
    for name, t in (('spatial_shapes', spatial_shapes), ('level_start_index', level_start_index)):
        _require(t.dtype == torch.long, f'{op}: {name} must be int64, got {t.dtype}; use .long()')
    _check_same_device(op, ('value', value), ('spatial_shapes', spatial_shapes),
                       ('level_start_index', level_start_index), ('sampling_locations', sampling_locations),
                       ('attention_weights', attention_weights))
    _require(level_start_index.shape == (levels,), f'{op}: level_start_index must be (num_levels,) = '
             f'({levels},) to match spatial_shapes, got shape {tuple(level_start_index.shape)}')
    _require(int(im2col_step) > 0, f'{op}: im2col_step must be a positive integer, got {im2col_step}')
    shapes = spatial_shapes.tolist()
    _require(all(h > 0 and w > 0 for h, w in shapes), f'{op}: spatial_shapes must be positive, got {shapes}')
    sizes = [h * w for h, w in shapes]
    _require(sum(sizes) == num_keys, f'{op}: spatial_shapes {shapes} hold {sum(sizes)} positions but value has '
             f'{num_keys} keys; value must be the levels flattened and concatenated')
    starts = [sum(sizes[:i]) for i in range(levels)]
    _require(level_start_index.tolist() == starts, f'{op}: level_start_index {level_start_index.tolist()} '
             f'does not match spatial_shapes {shapes}; it must be {starts} (0, then the cumulative h * w)')


def _grid_sample_pixel(grid: Tensor, size: Tensor) -> Tensor:
    """The pixel coordinate ``grid_sample`` (align_corners=False) computes from a grid coordinate in
    [-1, 1], rounded as its kernel rounds it: on CPU one fused multiply-add ``grid * size/2 + (size-1)/2``
    (``addcmul`` fuses it too; ``(grid + 1) * size / 2 - 0.5`` rounds some pixel centres to the other
    side), on CUDA ``((grid + 1) * size - 1) / 2``. The side decides the one-sided gradient there."""
    if grid.device.type == 'cpu':
        return torch.addcmul((size - 1) / 2, grid, size / 2)
    return ((grid + 1) * size - 1) / 2


def _ms_deform_attn_corners(value: Tensor, spatial_shapes: Tensor, sampling_locations: Tensor,
                            attention_weights: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """The bilinear corners of every sampling point, as rows of ``value`` viewed as a (B*S*H, D) table.

    Returns (rows (B*Q*H, L*P*4) int, coefficients (B*Q*H, L*P*4), the parts the backward needs:
    (corner weights (B, Q, H, L, P, 4) zero where the corner lies outside its level, the corners
    inside their level (same shape, bool), fx, fy (B, Q, H, L, P), the bilinear fractions, and (L, 1)
    level widths and heights)).

    A corner's coefficient is its attention weight times its bilinear weight. The pixel coordinate
    is computed as ``grid_sample`` computes it on CPU, from the same grid ``2 * loc - 1`` as mmcv's
    ``multi_scale_deformable_attn_pytorch``, so that a location exactly on the pixel grid picks the same
    corners there (the gradient is one-sided at a pixel centre).
    """
    batch, keys, heads, _ = value.shape
    _, queries, _, levels, points, _ = sampling_locations.shape
    shapes = spatial_shapes.to(value.device)
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = (sizes.cumsum(0) - sizes).view(levels, 1)
    height = shapes[:, 0].view(levels, 1).to(value.dtype)
    width = shapes[:, 1].view(levels, 1).to(value.dtype)
    grid = 2 * sampling_locations - 1
    # clamped where every corner is outside anyway
    ix = _grid_sample_pixel(grid[..., 0], width).clamp(min=-2).minimum(width + 1)
    iy = _grid_sample_pixel(grid[..., 1], height).clamp(min=-2).minimum(height + 1)
    x0f, y0f = ix.floor(), iy.floor()
    fx, fy = ix - x0f, iy - y0f
    # int32 rows where they fit (the corners reach 2 rows and columns past a level)
    index = torch.int32 if batch * (keys + 2 * int(shapes[:, 1].max()) + 4) * heads < 2**31 else torch.long
    x0, y0 = x0f.to(index), y0f.to(index)
    w_int, h_int = shapes[:, 1].view(levels, 1).to(index), shapes[:, 0].view(levels, 1).to(index)
    x0_in, x1_in = (x0 >= 0) & (x0 < w_int), (x0 >= -1) & (x0 < w_int - 1)
    y0_in, y1_in = (y0 >= 0) & (y0 < h_int), (y0 >= -1) & (y0 < h_int - 1)
    inside = torch.stack((x0_in & y0_in, x1_in & y0_in, x0_in & y1_in, x1_in & y1_in), -1)  # nw, ne, sw, se
    gx, gy = 1 - fx, 1 - fy
    bilinear = torch.stack((gx * gy, fx * gy, gx * fy, fx * fy), -1).masked_fill_(~inside, 0)
    # row of (b, key, h) in value (B, S, H, D) viewed as (B*S*H, D); a corner outside reads row 0 with weight 0
    base = (torch.arange(batch, device=value.device, dtype=index).view(batch, 1, 1, 1, 1) * (keys * heads)
            + torch.arange(heads, device=value.device, dtype=index).view(1, 1, heads, 1, 1))
    nw = (starts.to(index) + y0 * w_int + x0) * heads + base
    rows = torch.stack((nw, nw + heads, nw + w_int * heads, nw + (w_int + 1) * heads), -1).masked_fill_(~inside, 0)
    coefficients = bilinear * attention_weights[..., None]
    per_bag = levels * points * 4
    return (rows.view(batch * queries * heads, per_bag), coefficients.view(batch * queries * heads, per_bag),
            (bilinear, inside, fx, fy, width, height))


def _ms_deform_attn(value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                    sampling_locations: Tensor, attention_weights: Tensor) -> Tensor:
    """mmcv's multi-scale deformable attention: each level sampled bilinearly at its own (h, w)
    with exact coordinates (zero outside it), weighted and summed.

    One ``embedding_bag`` over ``value`` viewed as a (B*S*H, D) table of rows (no copy of value):
    each (batch, query, head) is a bag of its L*P*4 bilinear corners, with coefficient attention
    weight x bilinear weight. A row is D contiguous numbers, where ``grid_sample`` on (B*H, D, h, w)
    reads each channel from another plane; a skewed level (1 x 600) costs its 600 keys.

    Args:
        value: (B, S, H, D), the L levels flattened (row-major) and concatenated along S.
        spatial_shapes: (L, 2) int64 rows (h, w) with sum(h * w) == S.
        level_start_index: (L,) int64, checked to be the cumulative level sizes (so unused here).
        sampling_locations: (B, Q, H, L, P, 2), (x, y) in [0, 1] of each level; outside it the
            samples read zeros (``grid_sample``'s zero padding, align_corners=False).
        attention_weights: (B, Q, H, L, P).

    Returns:
        (B, Q, H * D).
    """
    batch, _, heads, dims = value.shape
    queries = sampling_locations.shape[1]
    rows, coefficients, _ = _ms_deform_attn_corners(value, spatial_shapes, sampling_locations, attention_weights)
    out = F.embedding_bag(rows, value.reshape(-1, dims), per_sample_weights=coefficients, mode='sum')
    return out.view(batch, queries, heads * dims)


_CHUNK = 2**18
"""Numbers gathered per chunk of the backward (1 MiB in float32: small enough to stay in cache)."""


def _ms_deform_attn_grads(value: Tensor, spatial_shapes: Tensor, sampling_locations: Tensor,
                          attention_weights: Tensor, grad_output: Tensor,
                          grad_value: Tensor) -> tuple[Tensor, Tensor]:
    """Adds d(out)/d(value) into ``grad_value`` ((B*S*H, D), value's dtype) and returns the
    gradients of sampling_locations and attention_weights, by hand (no second forward).

    Per corner c of a point: out += a * b_c * v_c, so d/dv_c = a * b_c * g, d/da = sum_c b_c <g, v_c>,
    and d/dfx (fx the x fraction) = a * ((1-fy) (G_ne - G_nw) + fy (G_se - G_sw)) with G_c = <g, v_c>
    (zero outside the level), times the level width for d/dx (loc in [0, 1]); likewise for y."""
    dims = value.shape[-1]
    rows, coefficients, (bilinear, inside, fx, fy, width, height) = _ms_deform_attn_corners(
        value, spatial_shapes, sampling_locations, attention_weights)
    table = value.reshape(-1, dims)
    g = grad_output.reshape(rows.shape[0], dims)
    per_bag = rows.shape[1]
    dots = torch.empty_like(coefficients)  # <g, v_c> of each corner
    step = max(1, _CHUNK // (per_bag * dims))
    for i in range(0, rows.shape[0], step):
        chunk_rows = rows[i:i + step].reshape(-1).long()  # int32 indices take a slower path
        corners = table.index_select(0, chunk_rows).view(-1, per_bag, dims)
        g_chunk = g[i:i + step]
        dots[i:i + step] = torch.bmm(corners, g_chunk.unsqueeze(-1)).squeeze(-1)
        contributions = (coefficients[i:i + step].unsqueeze(-1) * g_chunk.unsqueeze(1)).view(-1, dims)
        grad_value.index_add_(0, chunk_rows, contributions.to(grad_value.dtype))
    dots = dots.view(bilinear.shape) * inside
    grad_weights = (dots * bilinear).sum(-1)
    nw, ne, sw, se = dots.unbind(-1)
    weights = attention_weights
    grad_x = weights * ((1 - fy) * (ne - nw) + fy * (se - sw)) * width
    grad_y = weights * ((1 - fx) * (sw - nw) + fx * (se - ne)) * height
    return torch.stack((grad_x, grad_y), -1), grad_weights


def _ms_deform_attn_work_dtype(value: Tensor) -> torch.dtype:
    # bfloat16 (and float16 on CPU) run in float32: the sums of L*P*4 corners and the gradients need it
    return torch.float32 if value.dtype == torch.bfloat16 or (
        value.dtype == torch.float16 and value.device.type == 'cpu') else value.dtype


def ms_deform_attn_forward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                           sampling_locations: Tensor, attention_weights: Tensor, *, im2col_step: int) -> Tensor:
    """Multi-scale deformable attention, (B, Q, H * D): the same function as mmcv's
    ``multi_scale_deformable_attn_pytorch`` (shapes in :func:`_ms_deform_attn`).

    ``im2col_step`` (how many images compiled mmcv processes at once) is checked, then unused.
    """
    CALLS['ms_deform_attn_forward'] += 1
    _check_ms_deform_attn('ms_deform_attn', value, value_spatial_shapes, value_level_start_index,
                          sampling_locations, attention_weights, im2col_step)
    work = _ms_deform_attn_work_dtype(value)
    with torch.no_grad():
        out = _ms_deform_attn(value.to(work).contiguous(), value_spatial_shapes, value_level_start_index,
                              sampling_locations.to(work), attention_weights.to(work))
    return out.to(value.dtype)


def ms_deform_attn_backward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                            sampling_locations: Tensor, attention_weights: Tensor, grad_output: Tensor,
                            grad_value: Tensor, grad_sampling_loc: Tensor, grad_attn_weight: Tensor, *,
                            im2col_step: int) -> None:
    """Adds the gradients w.r.t. value, sampling_locations and attention_weights into
    ``grad_value`` (B, S, H, D), ``grad_sampling_loc`` (B, Q, H, L, P, 2) and ``grad_attn_weight``
    (B, Q, H, L, P), given ``grad_output`` (B, Q, H * D), by hand (:func:`_ms_deform_attn_grads`):
    the corners are recomputed, not the forward (the compiled kernel also keeps nothing from its forward)."""
    CALLS['ms_deform_attn_backward'] += 1
    op = 'ms_deform_attn (backward)'
    _check_ms_deform_attn(op, value, value_spatial_shapes, value_level_start_index, sampling_locations,
                          attention_weights, im2col_step)
    batch, _, heads, dims = value.shape
    queries = sampling_locations.shape[1]
    _check_out(op, 'grad_output', grad_output, (batch, queries, heads * dims))
    _check_out(op, 'grad_value', grad_value, tuple(value.shape))
    _check_out(op, 'grad_sampling_loc', grad_sampling_loc, tuple(sampling_locations.shape))
    _check_out(op, 'grad_attn_weight', grad_attn_weight, tuple(attention_weights.shape))
    _check_float(op, 'grad_output', grad_output)
    _check_same_device(op, ('value', value), ('grad_output', grad_output), ('grad_value', grad_value),
                       ('grad_sampling_loc', grad_sampling_loc), ('grad_attn_weight', grad_attn_weight))
    work = _ms_deform_attn_work_dtype(value)
    direct = grad_value.dtype == work and grad_value.is_contiguous()
    value_grad = grad_value if direct else torch.zeros(value.shape, dtype=work, device=value.device)
    grad_loc, grad_weights = _ms_deform_attn_grads(
        value.to(work).contiguous(), value_spatial_shapes, sampling_locations.to(work), attention_weights.to(work),
        grad_output.to(work), value_grad.view(-1, value.shape[-1]))
    if not direct:
        grad_value.add_(value_grad.to(grad_value.dtype))
    grad_sampling_loc.add_(grad_loc.to(grad_sampling_loc.dtype))
    grad_attn_weight.add_(grad_weights.to(grad_attn_weight.dtype))
