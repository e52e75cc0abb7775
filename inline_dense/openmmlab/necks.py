"""The simple feature pyramid of ViTDet as an mmdet neck, and the norm its configs name.

Registered in mmengine's root ``MODELS`` (mmdet's and mmseg's are its children), under mmdet's own
names from ``projects/ViTDet`` (which mmdet's wheel does not ship):

- ``SimpleFPN``: :class:`inline_dense.layers.simple_pyramid.SimpleFeaturePyramid` with mmdet's
  arguments (``backbone_channel``, ``in_channels``, ``out_channels``, ``num_outs``, ``norm_cfg``) and
  ``init_cfg``. It takes the backbone's tuple of stride-16 maps and uses the last one;
- ``LN2d``: LayerNorm over the channels of a map, for ``norm_cfg=dict(type='LN2d')`` in the neck and
  the heads.

Departures from mmdet's ``SimpleFPN``: the stride-32 max-pool rounds up (``ceil_mode``, see the
brick's docstring); no ``conv_cfg`` / ``act_cfg`` (mmdet's configs leave them at plain convolutions
and no activation, which is what this does); 1x1 and 3x3 convolutions carry no bias (a norm follows,
as in detectron2's ViTDet; mmdet's ``ConvModule`` drops the bias too when a norm follows).
"""
from collections.abc import Sequence
from typing import Any

import torch
from mmcv.cnn import build_norm_layer
from mmengine.model import BaseModule
from mmengine.registry import MODELS
from torch import nn

from ..layers.simple_pyramid import LayerNorm2d, SimpleFeaturePyramid

__all__ = ['LN2d', 'SimpleFPN']


@MODELS.register_module()
class LN2d(LayerNorm2d):
    """``LN2d`` for ``norm_cfg``: LayerNorm over the channels of ``(B, C, H, W)``."""

    _abbr_ = 'ln'


@MODELS.register_module()
class SimpleFPN(SimpleFeaturePyramid, BaseModule):
    """ViTDet's simple feature pyramid as an mmdet neck (the arguments of mmdet's ``projects/ViTDet``).

    Args:
        backbone_channel: the plain backbone's width ``C``.
        in_channels: ``[C/4, C/2, C, C]``, the channels after the rescaling branches (None: derived).
        out_channels: channels of every output (256 for Mask R-CNN / RetinaNet).
        num_outs: 4 or 5 (5 adds the stride-64 level Mask R-CNN's RPN and RetinaNet use).
        norm_cfg: the norm after each deconv / conv (default ``LN2d``).
        init_cfg: mmengine's ``init_cfg``.

    Forward: the backbone's tuple of ``(B, C, H, W)`` stride-16 maps (the last is used) or one map ->
    a tuple of ``num_outs`` maps at strides 4, 8, 16, 32 (, 64).
    """

    def __init__(self, backbone_channel: int, in_channels: Sequence[int] | None = None, out_channels: int = 256,
                 num_outs: int = 5, norm_cfg: dict | None = None,
                 init_cfg: dict | list[dict] | None = None) -> None:
        norm_cfg = dict(type='LN2d', requires_grad=True) if norm_cfg is None else norm_cfg

        def norm(channels: int) -> nn.Module:
            return build_norm_layer(norm_cfg, channels)[1]

        super().__init__(backbone_channel, out_channels, num_outs, in_channels=in_channels, norm_layer=norm)
        self.init_cfg = init_cfg

    def forward(self, inputs: Any) -> tuple[torch.Tensor, ...]:  # type: ignore[override]
        """The backbone's outputs (a tuple of maps, the last used, or one map) -> ``num_outs`` maps."""
        if isinstance(inputs, (tuple, list)):
            if not inputs:
                raise ValueError('SimpleFPN: the backbone gave no output; set its out_indices to include the last '
                                 'block.')
            inputs = inputs[-1]
        return tuple(super().forward(inputs))
