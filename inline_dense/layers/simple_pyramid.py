"""The simple feature pyramid of ViTDet (Li et al., 2022): strides 4, 8, 16, 32 from one stride-16 map.

A plain backbone (InLine-DeiT) ends on one map ``(B, C, H, W)`` at stride 16. Four branches rescale it:

- stride 4: deconv 2x2/2 (C -> C/2), LayerNorm over channels, GELU, deconv 2x2/2 (C/2 -> C/4);
- stride 8: deconv 2x2/2 (C -> C/2);
- stride 16: identity (C);
- stride 32: max-pool 2x2/2 (C), with ``ceil_mode=True``: an odd ``H`` or ``W`` gives ``ceil(H / 2)``,
  so the coarse map covers every stride-16 cell, as a stride-2 convolution with padding or the
  FPN's extra max-pool level would (ViTDet floors and drops the last row / column);

then each through a 1x1 convolution to ``out_channels`` + norm and a 3x3 convolution + norm (no bias,
no activation). With ``num_outs = 5`` a fifth map at stride 64 is a 1x1/2 max-pool of the stride-32
output (ViTDet's ``LastLevelMaxPool``). Any ``H, W >= 1`` works: the deconvolutions double the size
exactly.

Plain torch; the norm is a factory (default :class:`LayerNorm2d`) so that mmdet's ``norm_cfg`` can
supply its own (:mod:`inline_dense.openmmlab.necks`).
"""
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

NormFactory = Callable[[int], nn.Module]


class LayerNorm2d(nn.Module):
    """LayerNorm over the channels of a ``(B, C, H, W)`` map, per pixel (ViTDet's ``LayerNorm`` on maps)."""

    def __init__(self, num_channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num_channels))
        self.bias = nn.Parameter(torch.zeros(num_channels))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(B, C, H, W)`` -> ``(B, C, H, W)``."""
        x = F.layer_norm(x.permute(0, 2, 3, 1), x.shape[1:2], self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


def pyramid_channels(backbone_channel: int) -> list[int]:
    """The channels of the four rescaled maps (strides 4, 8, 16, 32): ``[C/4, C/2, C, C]``."""
    return [backbone_channel // 4, backbone_channel // 2, backbone_channel, backbone_channel]


class SimpleFeaturePyramid(nn.Module):
    """One stride-16 map -> ``num_outs`` maps of ``out_channels`` at strides 4, 8, 16, 32 (and 64).

    Args:
        backbone_channel: ``C``, the channels of the input map (divisible by 4).
        out_channels: channels of every output.
        num_outs: 4 (strides 4-32) or 5 (plus stride 64 by a 1x1/2 max-pool of the last).
        in_channels: the channels after the four rescaling branches; must be ``[C/4, C/2, C, C]``
            (mmdet's ``SimpleFPN`` asks for them; ``None`` derives them).
        norm_layer: the norm after each deconv / conv, a factory ``channels -> module``
            (default :class:`LayerNorm2d`).

    Shapes: ``(B, C, H, W)`` -> ``[(B, out, 4H, 4W), (B, out, 2H, 2W), (B, out, H, W),
    (B, out, ceil(H/2), ceil(W/2))]`` (+ ``(B, out, ceil(H/4), ceil(W/4))``).
    """

    def __init__(self, backbone_channel: int, out_channels: int = 256, num_outs: int = 5,
                 in_channels: Sequence[int] | None = None, norm_layer: NormFactory | None = None) -> None:
        super().__init__()
        if backbone_channel < 4 or backbone_channel % 4:
            raise ValueError(f'SimpleFeaturePyramid: backbone_channel={backbone_channel} must be a positive multiple '
                             f'of 4 (the stride-4 branch has backbone_channel // 4 channels); pass the '
                             f"backbone's embedding width.")
        expected = pyramid_channels(backbone_channel)
        if in_channels is not None and list(in_channels) != expected:
            raise ValueError(f'SimpleFeaturePyramid: in_channels={list(in_channels)} does not fit '
                             f'backbone_channel={backbone_channel}; the four branches give {expected}: pass that '
                             f'(or leave in_channels out).')
        if num_outs not in (4, 5):
            raise ValueError(f'SimpleFeaturePyramid: num_outs={num_outs}; use 4 (strides 4-32) or 5 (plus a '
                             f'stride-64 max-pool level, as for Mask R-CNN and RetinaNet).')
        norm = norm_layer or LayerNorm2d
        c = backbone_channel
        self.backbone_channel, self.out_channels, self.num_outs = c, out_channels, num_outs
        self.in_channels = expected
        self.rescale = nn.ModuleList([
            nn.Sequential(nn.ConvTranspose2d(c, c // 2, 2, stride=2), norm(c // 2), nn.GELU(),
                          nn.ConvTranspose2d(c // 2, c // 4, 2, stride=2)),
            nn.ConvTranspose2d(c, c // 2, 2, stride=2),
            nn.Identity(),
            nn.MaxPool2d(2, stride=2, ceil_mode=True),
        ])
        self.lateral_convs = nn.ModuleList(
            nn.Sequential(nn.Conv2d(ch, out_channels, 1, bias=False), norm(out_channels)) for ch in expected)
        self.output_convs = nn.ModuleList(
            nn.Sequential(nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False), norm(out_channels))
            for _ in expected)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """``(B, C, H, W)`` stride-16 map -> ``num_outs`` maps, finest first (shapes in the class docstring)."""
        if x.dim() != 4 or x.shape[1] != self.backbone_channel:
            raise ValueError(f'SimpleFeaturePyramid: expects one (B, {self.backbone_channel}, H, W) map, got '
                             f'{tuple(x.shape)}; pass the stride-16 output of the plain backbone.')
        outs = [out(lat(rescale(x))) for rescale, lat, out in zip(self.rescale, self.lateral_convs, self.output_convs)]
        if self.num_outs == 5:
            outs.append(F.max_pool2d(outs[-1], 1, stride=2))
        return outs
