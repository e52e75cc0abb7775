"""What gets exported: a plain ``image -> tensors`` module around an mmseg / mmdet model.

* a segmentor (mmseg ``EncoderDecoder``) becomes :class:`SegmentorLogits`: the normalised image
  (B, 3, H, W) -> per-class logits (B, K, H, W), the decode head's output resized to the input;
* a detector (mmdet) becomes :class:`DetectorFeatures`: the image -> its backbone and neck
  features, a tuple of (B, C, H / s, W / s). Box post-processing (NMS, RoI heads, masks) stays
  with mmdet or mmdeploy: its output sizes depend on the data.

Inputs are already normalised: the data preprocessor (mean/std, padding) is not part of the
graph, as in mmdeploy.
"""

import torch
import torch.nn.functional as F
from torch import nn


class AdaptiveAvgPool2dByMatmul(nn.Module):
    """``nn.AdaptiveAvgPool2d`` for any input size as two averaging matrices:
    (B, C, H, W) -> (B, C, oh, ow) with ``rows (oh, H) @ x @ cols (W, ow)``.

    Output cell i averages input rows ``floor(i * H / oh)`` to ``ceil((i + 1) * H / oh) - 1``, as
    PyTorch's kernel does; written with tensor ops only, it traces for symbolic H and W, where the
    exporters need a static input size for adaptive pooling (mmseg's pyramid pooling module).
    """

    def __init__(self, output_size: tuple[int, int]) -> None:
        super().__init__()
        self.output_size = output_size

    @staticmethod
    def averaging(size: int, out: int, like: torch.Tensor) -> torch.Tensor:
        """(out, size) matrix whose row i averages cell i's span of ``size`` positions."""
        pos = torch.arange(size, device=like.device).unsqueeze(0)  # (1, size)
        cell = torch.arange(out, device=like.device).unsqueeze(1)  # (out, 1)
        start = torch.div(cell * size, out, rounding_mode='floor')
        end = torch.div((cell + 1) * size + out - 1, out, rounding_mode='floor')
        inside = ((pos >= start) & (pos < end)).to(like.dtype)
        return inside / inside.sum(1, keepdim=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        oh, ow = self.output_size
        rows = self.averaging(x.shape[-2], oh, x)
        cols = self.averaging(x.shape[-1], ow, x)
        return rows @ x @ cols.t()


def replace_adaptive_pooling(model: nn.Module) -> list[str]:
    """Swaps every ``nn.AdaptiveAvgPool2d`` with a fixed output size for
    :class:`AdaptiveAvgPool2dByMatmul` (same function); returns the names of those swapped."""
    swapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.AdaptiveAvgPool2d):
                size = child.output_size
                size = (size, size) if isinstance(size, int) else tuple(size)
                if None in size:
                    continue
                setattr(module, child_name, AdaptiveAvgPool2dByMatmul(size))
                swapped.append(f'{name}.{child_name}' if name else child_name)
    return swapped


class UpsampleByInteger(nn.Module):
    """mmseg's ``Upsample`` with an integer scale factor ``k`` and no fixed size:
    (B, C, H, W) -> (B, C, k H, k W), resized by ``F.interpolate`` as mmseg does.

    mmseg computes the output size as ``int(H * float(k))``; ``torch.export`` turns that float
    product into a constant, the export input's size, so the exported graph resized every input's
    maps to the export example's size (the toy Semantic FPN's FPNHead: onnxruntime then differed
    by 6e-2 to 1.3e-1 relative). ``H * k`` in integers stays symbolic and is the same number.
    """

    def __init__(self, factor: int, mode: str, align_corners: bool | None) -> None:
        super().__init__()
        self.factor = factor
        self.mode = mode
        self.align_corners = align_corners

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size = (x.shape[-2] * self.factor, x.shape[-1] * self.factor)
        return F.interpolate(x, size=size, mode=self.mode, align_corners=self.align_corners)


def replace_float_upsampling(model: nn.Module) -> list[str]:
    """Swaps every mmseg ``Upsample`` without a fixed size and with an integer scale factor for
    :class:`UpsampleByInteger` (same function); returns the names of those swapped."""
    try:
        from mmseg.models.utils import Upsample
    except ImportError:  # mmdet alone: nothing of mmseg's to replace
        return []
    swapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            factor = getattr(child, 'scale_factor', None)
            if (isinstance(child, Upsample) and not child.size and isinstance(factor, float)
                    and factor.is_integer()):
                setattr(module, child_name, UpsampleByInteger(int(factor), child.mode, child.align_corners))
                swapped.append(f'{name}.{child_name}' if name else child_name)
    return swapped


class SegmentorLogits(nn.Module):
    """mmseg ``EncoderDecoder`` -> ``image (B, 3, H, W) -> logits (B, K, H, W)``."""

    def __init__(self, segmentor: nn.Module) -> None:
        super().__init__()
        self.segmentor = segmentor
        self.align_corners = bool(getattr(segmentor, 'align_corners', False))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        logits = self.segmentor._forward(image)
        return F.interpolate(logits, size=image.shape[-2:], mode='bilinear', align_corners=self.align_corners)


class DetectorFeatures(nn.Module):
    """mmdet detector -> ``image (B, 3, H, W) -> tuple of (B, C, H / s, W / s)`` (backbone + neck)."""

    def __init__(self, detector: nn.Module) -> None:
        super().__init__()
        self.detector = detector

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.detector.extract_feat(image))
