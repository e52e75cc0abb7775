"""mmcv's ``nms`` for the stand-in :mod:`inline_dense.ops.ext`: ``torchvision.ops.nms``, with the
legacy ``offset=1`` box size by widening the boxes."""
import math

import torch
import torchvision  # registers torch.ops.torchvision.*
from torch import Tensor

from .checks import OpInputError, check_float, check_same_device, kernel_dtype, require


def nms(boxes: Tensor, scores: Tensor, iou_threshold: float, offset: int = 0) -> Tensor:
    """Indices (M,) int64 of the kept boxes, by decreasing score.

    Args:
        boxes: (N, 4) x1, y1, x2, y2.
        scores: (N,).
        iou_threshold: a box is dropped when its IoU with a kept one is above this.
        offset: 1 for the legacy box size ``x2 - x1 + 1``.
    """
    require(offset in (0, 1), f'nms: offset must be 0 or 1, got {offset}')
    require(boxes.dim() == 2 and boxes.shape[1] == 4,
            f'nms: boxes must be (N, 4) rows of x1, y1, x2, y2, got shape {tuple(boxes.shape)}')
    require(scores.dim() == 1 and scores.shape[0] == boxes.shape[0],
            f'nms: scores must be (N,) = ({boxes.shape[0]},) to match boxes, got shape {tuple(scores.shape)}')
    check_float('nms', 'boxes', boxes)
    check_float('nms', 'scores', scores)
    check_same_device('nms', ('boxes', boxes), ('scores', scores))
    require(math.isfinite(float(iou_threshold)), f'nms: iou_threshold must be finite, got {iou_threshold}')
    if boxes.numel() and not bool(torch.isfinite(boxes).all() & torch.isfinite(scores).all()):
        raise OpInputError('nms: boxes or scores hold NaN or inf; they come from a diverged model or broken '
                           'inputs: check the losses (lower the learning rate) and the checkpoint')
    work_dtype = kernel_dtype(boxes)
    boxes = boxes.to(work_dtype)
    if offset:
        boxes = torch.cat([boxes[:, :2], boxes[:, 2:] + 1], dim=1)
    return torchvision.ops.nms(boxes, scores.to(work_dtype), float(iou_threshold))


