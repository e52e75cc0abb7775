"""InLine backbones with an FPN for torchvision's detectors (``FasterRCNN``, ``MaskRCNN``, ...).

    from torchvision.models.detection import FasterRCNN
    from inline_dense.torchvision_detection import inline_fpn_backbone, pass_image_sizes

    model = pass_image_sizes(FasterRCNN(inline_fpn_backbone('inline_swin_t'), num_classes=91))

:func:`inline_fpn_backbone` gives what torchvision's detectors take: a module with
``out_channels`` whose forward returns an ``OrderedDict`` of maps ``'0'..'3'`` (strides 4-32) and
``'pool'`` (stride 64).

**Padding.** torchvision pads every batch at the bottom / right. InLine attention is global, so
without help an image's features would depend on how much padding its batch adds.
:func:`pass_image_sizes` makes a detector hand each batch's real image sizes (torchvision's
``ImageList.image_sizes``) to the backbone, which passes them on as ``valid_hw``: the attention
ignores padded tokens, and the FPN sets every cell beyond an image's own area (``ceil(size /
stride)`` cells per level) to zero, as the zero padding of an image alone would be. It also
makes the detector's other stages independent of the padding: the batch is padded to a multiple
of 64 instead of 32 (torchvision's anchor generator takes each level's stride as padded size //
map size, which the stride-64 'pool' level gets wrong otherwise), and in eval the RPN scores no
anchor on padded cells (their objectness becomes 0 and ``rpn.score_thresh`` drops them). An
image's detections alone and next to a larger image then agree (to 1e-4 in the tests).

What remains is torchvision's RoIAlign at an image's bottom / right edge on a level where the
image fills the padded map to its last cell: there it repeats the last cell instead of blending
with the zero padding a larger batch supplies. Only boxes assigned to that level (the coarse
ones: box side >= 448 px for level '3') and touching that edge are affected. Without
:func:`pass_image_sizes` (or a ``valid_hw`` argument) the whole padded tensor counts as image.
"""
import math
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn
from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
from torchvision.ops.feature_pyramid_network import FeaturePyramidNetwork, LastLevelMaxPool

from .checkpoint import SCHEME, load_pretrained
from .models.backbone_base import InLineBackboneBase
from .models.classifier import FAMILIES, variant_kwargs
from .typing import HW


def valid_area_mask(sizes: Sequence[HW], grid: HW, stride: int, device: torch.device) -> torch.Tensor:
    """(B, 1, h, w) float mask: 1 on the cells that overlap image b's real ``sizes[b]`` pixels
    (``ceil(size / stride)`` rows and columns from the top left), 0 on its padding."""
    h, w = grid
    limits = torch.tensor([[-(-sh // stride), -(-sw // stride)] for sh, sw in sizes], device=device)
    rows = torch.arange(h, device=device).view(1, h, 1) < limits[:, 0].view(-1, 1, 1)
    cols = torch.arange(w, device=device).view(1, 1, w) < limits[:, 1].view(-1, 1, 1)
    return (rows & cols).unsqueeze(1).float()


class InLineFPNBackbone(nn.Module):
    """An InLine backbone (``body``) and torchvision's ``FeaturePyramidNetwork`` with a max-pool
    level: (B, 3, H, W) -> ``OrderedDict`` '0'..'3' (B, out_channels, ceil(H / s), ceil(W / s)),
    s = 4, 8, 16, 32, and 'pool' (stride 64).

    ``forward(x, valid_hw=None)``: ``valid_hw`` holds each image's real (height, width) in the
    padded batch ``x``; without it, the sizes that :func:`pass_image_sizes` recorded for this
    batch are used, if any.
    """

    def __init__(self, body: InLineBackboneBase, out_channels: int = 256) -> None:
        super().__init__()
        self.body = body
        self.strides = [body.strides[i] for i in body.out_indices]
        self.level_strides = self.strides + [2 * self.strides[-1]]  # the max-pool level halves the last
        self.current_sizes: Optional[List[HW]] = None  # the real sizes of the last batch, for the RPN
        self.fpn = FeaturePyramidNetwork([body.embed_dims[i] for i in body.out_indices], out_channels,
                                         extra_blocks=LastLevelMaxPool())
        self.out_channels = out_channels
        self._recorded: Optional[Tuple[torch.Size, List[HW]]] = None

    def record_image_sizes(self, batch: torch.Tensor, sizes: Sequence[HW]) -> None:
        """Remembers the real image sizes of the padded ``batch`` for the next forward on it."""
        self._recorded = (batch.shape, [(int(h), int(w)) for h, w in sizes])

    def _sizes_for(self, x: torch.Tensor) -> Optional[List[HW]]:
        recorded, self._recorded = self._recorded, None
        if recorded is not None and recorded[0] == x.shape:
            return recorded[1]
        return None

    def forward(self, x: torch.Tensor, valid_hw: Optional[Sequence[HW]] = None) -> Dict[str, torch.Tensor]:
        sizes = [tuple(s) for s in valid_hw] if valid_hw is not None else self._sizes_for(x)
        self.current_sizes = sizes
        feats = list(self.body(x, sizes))
        masks = None
        if sizes is not None:
            masks = [valid_area_mask(sizes, f.shape[-2:], s, x.device) for f, s in zip(feats, self.strides)]
            feats = [f * m for f, m in zip(feats, masks)]  # the output norms leave padded cells non-zero
        outs = self._pyramid(feats, masks)
        names = [str(i) for i in range(len(outs) - 1)] + ['pool']
        return OrderedDict(zip(names, outs))

    def _pyramid(self, feats: List[torch.Tensor], masks: Optional[List[torch.Tensor]]) -> List[torch.Tensor]:
        """torchvision's FPN top-down pass with the padded cells zeroed after every lateral sum, so
        that the 3x3 output convolutions see an image's border as an image alone shows it."""
        fpn = self.fpn

        def keep(t: torch.Tensor, i: int) -> torch.Tensor:
            return t if masks is None else t * masks[i]

        last = len(feats) - 1
        inner = keep(fpn.get_result_from_inner_blocks(feats[last], last), last)
        results = [fpn.get_result_from_layer_blocks(inner, last)]
        for i in range(last - 1, -1, -1):
            lateral = fpn.get_result_from_inner_blocks(feats[i], i)
            top_down = nn.functional.interpolate(inner, size=lateral.shape[-2:], mode='nearest')
            inner = keep(lateral + top_down, i)
            results.insert(0, fpn.get_result_from_layer_blocks(inner, i))
        results = [keep(r, i) for i, r in enumerate(results)]
        results, _ = fpn.extra_blocks(results, feats, [str(i) for i in range(len(results))])
        return results


def inline_fpn_backbone(variant: str = 'inline_swin_t', weights: Optional[str] = None, out_channels: int = 256,
                        **backbone_kwargs) -> InLineFPNBackbone:
    """An InLine backbone + FPN for torchvision's detectors.

    Args:
        variant: 'inline_swin_t' ... 'inline_cswin_b' (the names of ``inline://``).
        weights: None (from scratch), 'imagenet' (the authors' checkpoint of ``variant``, by
            ``inline://<variant>``), or a checkpoint path / URL / ``inline://`` name.
        out_channels: FPN channels.
        **backbone_kwargs: the backbone's arguments (``drop_path_rate``, ``with_cp``, ``frozen_stages``,
            ``embed_dims`` ...); ``out_indices`` must keep four stages.
    """
    kw = variant_kwargs(variant)
    body = FAMILIES[kw['family']](arch=kw['arch'], **backbone_kwargs)
    if len(body.out_indices) != 4:
        raise ValueError(f'inline_fpn_backbone: out_indices={body.out_indices}: torchvision\'s detectors take four '
                         f'FPN levels (0, 1, 2, 3) and the pool level.')
    if weights is not None:
        load_pretrained(body, SCHEME + variant if weights == 'imagenet' else weights)
    return InLineFPNBackbone(body, out_channels)


PADDED_SCORE = -1e4  # an objectness logit whose sigmoid is exactly 0 in float32 (unlike -inf, no NaN in a loss)


def pass_image_sizes(model: GeneralizedRCNN) -> GeneralizedRCNN:
    """Makes ``model`` (a torchvision detector on an :class:`InLineFPNBackbone`) independent of the
    padding its batches get (see the module docstring): a forward hook on ``model.transform``
    records ``ImageList.image_sizes`` for the padded tensor it made; batches are padded to
    multiples of 64; in eval a forward hook on ``model.rpn.head`` sets the objectness of anchors
    on padded cells to 0 and ``rpn.score_thresh`` drops them. Parameters and state-dict keys are
    unchanged. Returns ``model``."""
    backbone = getattr(model, 'backbone', None)
    if not isinstance(backbone, InLineFPNBackbone):
        raise TypeError(f'pass_image_sizes: model.backbone is a {type(backbone).__name__}, not an '
                        f'InLineFPNBackbone (build it with inline_fpn_backbone).')
    divisible = 2 * backbone.strides[-1]
    size_divisible = model.transform.size_divisible
    if size_divisible % divisible:
        model.transform.size_divisible = size_divisible * divisible // math.gcd(size_divisible, divisible)
    model.rpn.score_thresh = max(model.rpn.score_thresh, torch.finfo(torch.float32).tiny)

    def record(_module: nn.Module, _inputs: tuple, output: tuple) -> None:
        images = output[0]
        backbone.record_image_sizes(images.tensors, images.image_sizes)

    def ignore_padded_anchors(module: nn.Module, _inputs: tuple, output: tuple) -> Optional[tuple]:
        sizes = backbone.current_sizes
        logits, deltas = output
        if module.training or sizes is None or len(logits) != len(backbone.level_strides):
            return None
        masked = [t.masked_fill(valid_area_mask(sizes, t.shape[-2:], s, t.device) == 0, PADDED_SCORE)
                  for t, s in zip(logits, backbone.level_strides)]
        return masked, deltas

    model.transform.register_forward_hook(record)
    model.rpn.head.register_forward_hook(ignore_padded_anchors)
    return model
