"""The module to export for a config: a segmentor's logits or a detector's features."""
from typing import Any

from torch import nn

from ..checkpoint import Advice, load_file
from ..openmmlab.config_model import ConfigModel
from ..runtime import inline_layers
from .wrappers import DetectorFeatures, SegmentorLogits, replace_adaptive_pooling, replace_float_upsampling

DEPLOY = Advice("pass the whole-model checkpoint tools/train.py wrote for this config",
                'leave the checkpoint out to export the config\'s random initialisation')


def load_full_checkpoint(model: nn.Module, checkpoint: str) -> None:
    """Loads a whole-model checkpoint (tools/train.py's .pth) through the one strict loader: every
    key must match, NaN / inf and integer-typed weights are refused."""
    load_file(model, checkpoint, within=None, advice=DEPLOY, why="config's model (is it from another config?)")


def deployable(config: str, checkpoint: str | None = None, attn_impl: str | None = None,
               cfg_options: dict[str, Any] | None = None) -> tuple[nn.Module, str, list[str]]:
    """(module in eval mode, task, output names) for an mmseg / mmdet config.

    mmseg configs give :class:`SegmentorLogits` (output ``logits``), mmdet configs
    :class:`DetectorFeatures` (outputs ``feat0`` ... one per pyramid level). Without a checkpoint
    the weights are the config's random initialisation. ``attn_impl`` overrides the InLine
    layers' evaluation; ``cfg_options`` (``--cfg-options``) are merged into the config first.
    """
    built = ConfigModel(config, cfg_options)
    model = built.model
    if checkpoint:
        load_full_checkpoint(model, checkpoint)
    else:  # random weights: no pretrained backbone file is fetched either
        for module in model.modules():
            cfg = getattr(module, 'init_cfg', None)
            if isinstance(cfg, dict) and cfg.get('type') == 'Pretrained':
                module.init_cfg = None
        model.init_weights()
    if attn_impl is not None:
        for layer in inline_layers(model):
            layer.impl = attn_impl
    replace_adaptive_pooling(model)
    replace_float_upsampling(model)  # mmseg's FPNHead
    if built.scope == 'mmseg':
        return SegmentorLogits(model).eval(), 'segmentation', ['logits']
    module = DetectorFeatures(model).eval()
    levels = getattr(getattr(model, 'neck', None), 'num_outs', None) or len(model.backbone.out_indices)
    return module, 'detection', [f'feat{i}' for i in range(levels)]
