"""InLine backbones with an FPN for torchvision's detectors (Faster / Mask / Keypoint R-CNN,
RetinaNet, FCOS).

    from torchvision.models.detection import FasterRCNN
    from inline_dense.torchvision_detection import inline_fpn_backbone, pass_image_sizes

    model = pass_image_sizes(FasterRCNN(inline_fpn_backbone(), num_classes=91))  # variants.EXAMPLE + FPN

:func:`inline_fpn_backbone` gives what torchvision's detectors take: a module with
``out_channels`` whose forward returns an ``OrderedDict`` of maps ``'0'``, ``'1'``, ... (one per
backbone output: a pyramid's stages at strides 4-32) and ``'pool'`` (twice the last stride). It
takes the options of torchvision's ``resnet_fpn_backbone``
(``weights``, ``trainable_layers``, ``returned_layers``, ``extra_blocks``, ``norm_layer``); for
RetinaNet / FCOS: ``returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(256, 256)``.
``torch.jit.script`` of a detector on it is refused with a ``TypeError`` saying so.

**Padding.** torchvision pads every batch at the bottom / right. InLine attention is global, so
without help an image's features would depend on how much padding its batch adds.
:func:`pass_image_sizes` makes a detector hand each batch's real image sizes (torchvision's
``ImageList.image_sizes``) to the backbone, which passes them on as ``valid_hw``: the attention
ignores padded tokens, and the FPN sets every cell beyond an image's own area (``ceil(size /
stride)`` cells per level) to zero, as the zero padding of an image alone would be. It also
makes the detector's other stages independent of the padding: the batch is padded to a multiple
of the coarsest level's stride (64 with 'pool', 128 with 'p7'; torchvision's anchor generator
takes each level's stride as padded size // map size, which the extra levels get wrong
otherwise), and in eval the RPN (RetinaNet's / FCOS's head) scores no anchor on padded cells
(their score becomes 0 and the score threshold drops them). An image's detections alone and next
to a larger image then agree (to 1e-4 in the tests, Faster R-CNN and RetinaNet). FCOS's head
normalises with GroupNorm over the whole padded map, so its detections still depend on the
padding; :func:`pass_image_sizes` warns about such a head.

What remains is torchvision's RoIAlign at an image's bottom / right edge on a level where the
image fills the padded map to its last cell: there it repeats the last cell instead of blending
with the zero padding a larger batch supplies. Only boxes assigned to that level (the coarse
ones: box side >= 448 px for level '3') and touching that edge are affected. Without
:func:`pass_image_sizes` (or a ``valid_hw`` argument) the whole padded tensor counts as image.
"""
import math
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torchvision.models.detection import FCOS, RetinaNet
from torchvision.models.detection.generalized_rcnn import GeneralizedRCNN
from torchvision.ops import feature_pyramid_network as tv_fpn

from . import variants
from .checkpoint import load_pretrained
from .families import backbone_class
from .layers.backbone import InLineBackboneBase
from .layers.padding import PaddedBatchSizes, valid_grid_mask
from .layers.simple_pyramid import NormFactory, SimpleFeaturePyramid
from .torchvision_options import checkpoint_of, returned_to_out_indices, torchvision_advice, trainable_to_frozen
from .typing import HW


def valid_area_mask(sizes: Sequence[HW], grid: HW, stride: int, device: torch.device) -> torch.Tensor:
    """(B, 1, h, w) float mask: 1 on the cells that overlap image b's real ``sizes[b]`` pixels
    (``ceil(size / stride)`` rows and columns from the top left), 0 on its padding
    (``layers.padding.valid_grid_mask``, the backbones' own)."""
    return valid_grid_mask([(int(h), int(w)) for h, w in sizes], (int(grid[0]), int(grid[1])), stride,
                           device).unsqueeze(1).float()


class InLineFPNBackbone(nn.Module):
    """An InLine backbone (``body``) and torchvision's ``FeaturePyramidNetwork``: (B, 3, H, W) ->
    ``OrderedDict`` of (B, out_channels, ceil(H / s), ceil(W / s)) maps, '0', '1', ... for the
    body's ``out_indices`` (s its outputs' strides: 4, 8, 16, 32 for a pyramid's stages) and then the ``extra_blocks``'
    levels (default ``LastLevelMaxPool``: 'pool', stride 2 x the last; ``LastLevelP6P7``: 'p6',
    'p7').

    ``forward(x, valid_hw=None)``: ``valid_hw`` holds each image's real (height, width) in the
    padded batch ``x``; without it, the sizes that :func:`pass_image_sizes` recorded for this
    batch are used, if any.
    """

    def __init__(self, body: InLineBackboneBase, out_channels: int = 256,
                 extra_blocks: tv_fpn.ExtraFPNBlock | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.body = body
        outputs = body.output_info()
        self.strides = [outputs[i]['reduction'] for i in body.out_indices]
        extra_blocks = tv_fpn.LastLevelMaxPool() if extra_blocks is None else extra_blocks
        # the extra levels halve the last one, each (LastLevelMaxPool, LastLevelP6P7)
        extra = 1 if isinstance(extra_blocks, tv_fpn.LastLevelMaxPool) else \
            2 if isinstance(extra_blocks, tv_fpn.LastLevelP6P7) else 0
        self.level_strides = self.strides + [self.strides[-1] * 2 ** (k + 1) for k in range(extra)]
        self.current_sizes: list[HW] | None = None  # the real sizes of the last batch, for the heads
        self.fpn = tv_fpn.FeaturePyramidNetwork([outputs[i]['num_chs'] for i in body.out_indices], out_channels,
                                         extra_blocks=extra_blocks, norm_layer=norm_layer)
        self.out_channels = out_channels
        self._recorded = PaddedBatchSizes()

    def __prepare_scriptable__(self) -> nn.Module:
        raise TypeError(SCRIPT_REFUSAL)

    def record_image_sizes(self, batch: torch.Tensor, sizes: Sequence[HW]) -> None:
        """Remembers the real image sizes of the padded ``batch`` for the next forward on it."""
        self._recorded.record(batch, sizes)

    def _sizes_for(self, x: torch.Tensor) -> list[HW] | None:
        """The recorded sizes if ``x`` is the recorded batch; they serve one forward."""
        sizes = self._recorded.for_input(x)
        self._recorded.clear()
        return sizes

    def forward(self, x: torch.Tensor, valid_hw: Sequence[HW] | None = None) -> dict[str, torch.Tensor]:
        sizes = [(int(s[0]), int(s[1])) for s in valid_hw] if valid_hw is not None else self._sizes_for(x)
        self.current_sizes = sizes
        feats = list(self.body(x, sizes))
        masks = None
        if sizes is not None:
            masks = [valid_area_mask(sizes, f.shape[-2:], s, x.device) for f, s in zip(feats, self.strides)]
            feats = [f * m for f, m in zip(feats, masks)]  # the output norms leave padded cells non-zero
        outs, names = self._pyramid(feats, masks, sizes)
        return OrderedDict(zip(names, outs))

    def _pyramid(self, feats: list[torch.Tensor], masks: list[torch.Tensor] | None,
                 sizes: list[HW] | None) -> tuple[list[torch.Tensor], list[str]]:
        """torchvision's FPN top-down pass with the padded cells zeroed after every lateral sum, so
        that the 3x3 output convolutions see an image's border as an image alone shows it; the
        extra levels' padded cells are zeroed too."""
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
        names = [str(i) for i in range(len(results))]
        extra = fpn.extra_blocks
        if isinstance(extra, tv_fpn.LastLevelP6P7) and sizes is not None:  # zero the padding between p6 and p7 too
            p6_mask = valid_area_mask(sizes, self._half(results[-1]), self.level_strides[-2], results[-1].device)
            p6 = extra.p6(results[-1] if extra.use_P5 else feats[-1]) * p6_mask
            p7 = extra.p7(nn.functional.relu(p6))
            p7 = p7 * valid_area_mask(sizes, p7.shape[-2:], self.level_strides[-1], p7.device)
            return [*results, p6, p7], [*names, 'p6', 'p7']
        results, names = extra(results, feats, names)
        return results, names

    @staticmethod
    def _half(t: torch.Tensor) -> HW:
        h, w = t.shape[-2:]
        return (h + 1) // 2, (w + 1) // 2


class InLinePlainPyramidBackbone(InLineFPNBackbone):
    """A plain backbone (InLine-DeiT: every output at stride 16) and ViTDet's simple feature pyramid
    (:class:`inline_dense.layers.simple_pyramid.SimpleFeaturePyramid`) from its last output:
    (B, 3, H, W) -> ``OrderedDict`` '0'-'3' (strides 4, 8, 16, 32) and 'pool' (stride 64, ViTDet's
    ``LastLevelMaxPool``), each (B, out_channels, ceil(H / s), ceil(W / s)).

    Padding as :class:`InLineFPNBackbone`: with the batch's real sizes, every map is zeroed beyond an
    image's area after each rescaling, 1x1 and 3x3 convolution, and the max-pools see padded cells as
    -inf (as a window past an image alone's border is ignored), so an image's maps do not depend on
    its batch-mates. ``norm_layer``: a factory ``channels -> module`` for the pyramid's norms (default
    LayerNorm over channels, as ViTDet).
    """

    def __init__(self, body: InLineBackboneBase, out_channels: int = 256,
                 extra_blocks: tv_fpn.ExtraFPNBlock | None = None,
                 norm_layer: Callable[..., nn.Module] | None = None) -> None:
        nn.Module.__init__(self)
        if extra_blocks is not None and not isinstance(extra_blocks, tv_fpn.LastLevelMaxPool):
            raise ValueError(f'inline_fpn_backbone: the simple pyramid of a plain backbone adds its own stride-64 '
                             f"'pool' level (LastLevelMaxPool); extra_blocks={type(extra_blocks).__name__} is not "
                             f'supported: leave extra_blocks out (RetinaNet and FCOS take the 5 levels too).')
        self.body = body
        outputs = body.output_info()
        last = outputs[body.out_indices[-1]]
        norm: NormFactory | None = norm_layer
        self.pyramid = SimpleFeaturePyramid(last['num_chs'], out_channels, num_outs=5, norm_layer=norm)
        self.strides = [last['reduction'] // 4, last['reduction'] // 2, last['reduction'], last['reduction'] * 2]
        self.level_strides = [*self.strides, self.strides[-1] * 2]
        self.extra_blocks = tv_fpn.LastLevelMaxPool()  # what pass_image_sizes reads: one 'pool' level
        self.current_sizes = None
        self.out_channels = out_channels
        self._recorded = PaddedBatchSizes()

    def forward(self, x: torch.Tensor, valid_hw: Sequence[HW] | None = None) -> dict[str, torch.Tensor]:
        sizes = [(int(s[0]), int(s[1])) for s in valid_hw] if valid_hw is not None else self._sizes_for(x)
        self.current_sizes = sizes
        feat = self.body(x, sizes)[-1]
        pyramid = self.pyramid

        def keep(t: torch.Tensor, stride: int, fill: float = 0.0) -> torch.Tensor:
            if sizes is None:
                return t
            return t.masked_fill(valid_area_mask(sizes, (t.shape[-2], t.shape[-1]), stride, t.device) == 0, fill)

        feat = keep(feat, self.strides[2])
        outs = []
        for i, (rescale, lateral, output) in enumerate(zip(pyramid.rescale, pyramid.lateral_convs,
                                                           pyramid.output_convs)):
            source = keep(feat, self.strides[2], float('-inf')) if i == 3 else feat  # max-pool: padding never wins
            level = keep(rescale(source), self.strides[i])
            outs.append(keep(output(keep(lateral(level), self.strides[i])), self.strides[i]))
        pool = nn.functional.max_pool2d(outs[-1], 1, stride=2)
        return OrderedDict(zip(['0', '1', '2', '3', 'pool'], [*outs, keep(pool, self.level_strides[-1])]))


SCRIPT_REFUSAL = ('torch.jit.script of a model on an InLineFPNBackbone is not supported: the backbone keeps each '
                  "batch's image sizes in Python state (pass_image_sizes) and the InLine attention's control flow "
                  'is not TorchScript; run the detector eagerly.')
def inline_fpn_backbone(variant: str = variants.EXAMPLE, weights: Any = None, out_channels: int = 256,
                        trainable_layers: int | None = None, returned_layers: Sequence[int] | None = None,
                        extra_blocks: tv_fpn.ExtraFPNBlock | None = None,
                        norm_layer: Callable[..., nn.Module] | None = None,
                        **backbone_kwargs) -> InLineFPNBackbone:
    """An InLine backbone + FPN for torchvision's detectors, with the options of torchvision's
    ``resnet_fpn_backbone``. A plain backbone (InLine-DeiT, every output at stride 16) gets ViTDet's
    simple feature pyramid from its last returned block instead (:class:`InLinePlainPyramidBackbone`:
    '0'-'3' at strides 4-32 and 'pool'; by default from the last block; ``norm_layer`` replaces its
    LayerNorms; ``extra_blocks`` must be left out).

    Args:
        variant: a name of :data:`inline_dense.variants.VARIANTS` (those of ``inline://``); the
            default is the table's first (``variants.EXAMPLE``).
        weights: None / False (from scratch); True, 'imagenet' or 'DEFAULT' (any case; also an enum
            member of that name) for the authors' checkpoint of ``variant`` (``inline://<variant>``);
            or a checkpoint path / URL / ``inline://`` name.
        out_channels: FPN channels.
        trainable_layers: how many of the n outputs' stages (a pyramid's 4), counted from the last,
            train (n + 1: the patch embedding too); the rest are frozen (``frozen_stages``). None: the
            backbone's ``frozen_stages`` (default -1, everything trains).
        returned_layers: the outputs (1-n, torchvision's ``layer1`` .. ``layer4`` for a pyramid) the
            FPN takes; default all. RetinaNet and FCOS use ``[2, 3, 4]`` with ``LastLevelP6P7``.
        extra_blocks: torchvision's ``ExtraFPNBlock`` for the levels above (default
            ``LastLevelMaxPool``, 'pool').
        norm_layer: the FPN's normalisation (torchvision's ``norm_layer`` of the FPN; the InLine
            blocks keep their LayerNorms).
        **backbone_kwargs: the backbone's arguments (``drop_path_rate``, ``with_cp``, ``embed_dims`` ...).
    """
    entry, spec = variants.variant(variant), variants.spec_of(variant)
    checkpoint = checkpoint_of(variant, weights)
    preset = spec.presets[entry.arch]
    arch = dict(preset, **{k: v for k, v in backbone_kwargs.items() if k in preset and v is not None})
    strides = [o.stride for o in spec.outputs(arch)]
    if returned_layers is not None:
        if 'out_indices' in backbone_kwargs:
            raise ValueError(f'inline_fpn_backbone: give returned_layers (1-{len(strides)}) or out_indices '
                             f'(0-{len(strides) - 1}), not both.')
        backbone_kwargs['out_indices'] = returned_to_out_indices(returned_layers, strides)
    if trainable_layers is not None:
        if 'frozen_stages' in backbone_kwargs:
            raise ValueError('inline_fpn_backbone: give trainable_layers (torchvision) or frozen_stages, not both.')
        backbone_kwargs['frozen_stages'] = trainable_to_frozen(trainable_layers, len(strides))
    family: Callable[..., InLineBackboneBase] = backbone_class(spec)  # each family has its own arguments
    plain = len(set(strides)) == 1  # InLine-DeiT: one stride-16 map per block -> the simple pyramid
    if plain and returned_layers is None:
        backbone_kwargs.setdefault('out_indices', (len(strides) - 1,))
    body = family(arch=entry.arch, **backbone_kwargs)
    if checkpoint is not None:
        load_pretrained(body, checkpoint, advice=torchvision_advice(variant))
    pyramid = InLinePlainPyramidBackbone if plain else InLineFPNBackbone
    return pyramid(body, out_channels, extra_blocks=extra_blocks, norm_layer=norm_layer)


NORMS = (nn.GroupNorm, nn.InstanceNorm2d)  # statistics over each map, padding included (BatchNorm in eval: none)
PADDED_SCORE = -1e4  # an objectness logit whose sigmoid is exactly 0 in float32 (unlike -inf, no NaN in a loss)


def pass_image_sizes(model: nn.Module) -> nn.Module:
    """Makes ``model`` (a torchvision detector on an :class:`InLineFPNBackbone`: Faster / Mask /
    Keypoint R-CNN, RetinaNet or FCOS) independent of the padding its batches get (see the module
    docstring): a forward hook on ``model.transform`` records ``ImageList.image_sizes`` for the
    padded tensor it made; batches are padded to multiples of the coarsest level's stride; in eval
    a forward hook on the head that scores anchors (``model.rpn.head``, or RetinaNet's / FCOS's
    ``model.head``) gives anchors on padded cells a score of 0, which the score threshold drops.
    Parameters and state-dict keys are unchanged. Returns ``model``."""
    backbone = getattr(model, 'backbone', None)
    if not isinstance(backbone, InLineFPNBackbone):
        raise TypeError(f'pass_image_sizes: model.backbone is a {type(backbone).__name__}, not an '
                        f'InLineFPNBackbone (build it with inline_fpn_backbone).')
    if isinstance(model, GeneralizedRCNN):
        scorer, hook = model.rpn.head, _rpn_hook(backbone)
        model.rpn.score_thresh = max(model.rpn.score_thresh, torch.finfo(torch.float32).tiny)
    elif isinstance(model, (RetinaNet, FCOS)):
        scorer, hook = model.head, _dense_head_hook(backbone, model.anchor_generator.num_anchors_per_location())
        model.score_thresh = max(model.score_thresh, torch.finfo(torch.float32).tiny)
    else:
        raise TypeError(f'pass_image_sizes: {type(model).__name__} is not one of the torchvision detectors it '
                        f'supports (FasterRCNN, MaskRCNN, KeypointRCNN, RetinaNet, FCOS).')
    extra_blocks = backbone.extra_blocks if isinstance(backbone, InLinePlainPyramidBackbone) else \
        backbone.fpn.extra_blocks
    if not isinstance(extra_blocks, (tv_fpn.LastLevelMaxPool, tv_fpn.LastLevelP6P7)):
        raise TypeError(f'pass_image_sizes: the FPN\'s extra_blocks is a {type(extra_blocks).__name__}, '
                        f'whose levels\' strides it does not know; it supports LastLevelMaxPool and '
                        f'LastLevelP6P7.')
    norms = sorted({type(m).__name__ for m in scorer.modules() if isinstance(m, NORMS)})
    if norms:
        warnings.warn(f'pass_image_sizes: {type(scorer).__name__} normalises with {", ".join(norms)} over the whole '
                      f'padded batch, so its detections still depend on the padding (the backbone and FPN no '
                      f'longer do); a head without batch statistics, e.g. RetinaNet\'s default, is independent.',
                      stacklevel=2)
    divisible = max(backbone.level_strides)
    size_divisible = model.transform.size_divisible
    if size_divisible % divisible:
        model.transform.size_divisible = size_divisible * divisible // math.gcd(size_divisible, divisible)

    def record(_module: nn.Module, _inputs: tuple, output: tuple) -> None:
        images = output[0]
        backbone.record_image_sizes(images.tensors, images.image_sizes)

    model.transform.register_forward_hook(record)
    scorer.register_forward_hook(hook)
    return model


def _rpn_hook(backbone: InLineFPNBackbone) -> Callable:
    """The RPN head's hook: objectness logits (one (B, A, h, w) map per level) of padded cells -> 0."""
    def ignore_padded_anchors(module: nn.Module, _inputs: tuple, output: tuple) -> tuple | None:
        sizes = backbone.current_sizes
        logits, deltas = output
        if module.training or sizes is None or len(logits) != len(backbone.level_strides):
            return None
        masked = [t.masked_fill(valid_area_mask(sizes, t.shape[-2:], s, t.device) == 0, PADDED_SCORE)
                  for t, s in zip(logits, backbone.level_strides)]
        return masked, deltas
    return ignore_padded_anchors


def _dense_head_hook(backbone: InLineFPNBackbone, anchors: list[int]) -> Callable:
    """RetinaNet's / FCOS's head hook: ``cls_logits`` (B, sum of h * w * A over the levels, K) of
    anchors on padded cells -> ``PADDED_SCORE`` (the head orders them level, row, column, anchor)."""
    def ignore_padded_anchors(module: nn.Module, inputs: tuple, output: dict[str, torch.Tensor]) -> dict | None:
        sizes, feats = backbone.current_sizes, inputs[0]
        if module.training or sizes is None or len(feats) != len(backbone.level_strides):
            return None
        keep = [valid_area_mask(sizes, f.shape[-2:], s, f.device)[:, 0, :, :, None].expand(-1, -1, -1, a)
                .reshape(len(sizes), -1) for f, s, a in zip(feats, backbone.level_strides, anchors)]
        out = dict(output)
        out['cls_logits'] = output['cls_logits'].masked_fill(torch.cat(keep, 1)[..., None] == 0, PADDED_SCORE)
        return out
    return ignore_padded_anchors
