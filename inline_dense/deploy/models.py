"""The module to export for a config: a segmentor's logits or a detector's features."""
from typing import Any, Dict, List, Optional, Tuple

from torch import nn

from ..checkpoint.loading import CheckpointError, compare, read_checkpoint, select_weights
from ..openmmlab.config_model import ConfigModel
from ..runtime import inline_layers
from .wrappers import DetectorFeatures, SegmentorLogits, replace_adaptive_pooling, replace_float_upsampling


def load_full_checkpoint(model: nn.Module, checkpoint: str) -> None:
    """Loads a whole-model checkpoint (tools/train.py's .pth) strictly: every key must match."""
    state, _ = select_weights(read_checkpoint(checkpoint), 'auto', repr(checkpoint))
    missing, unexpected, mismatched = compare(model.state_dict(), dict(state))
    if missing or unexpected or mismatched:
        raise CheckpointError(f'{checkpoint!r} does not fit the model of this config (is it from another config?): '
                              f'missing {missing[:10]}, unexpected {unexpected[:10]}, '
                              f'shape mismatch {mismatched[:10]}.')
    model.load_state_dict(state, strict=True)


def deployable(config: str, checkpoint: Optional[str] = None, attn_impl: Optional[str] = None,
               cfg_options: Optional[Dict[str, Any]] = None) -> Tuple[nn.Module, str, List[str]]:
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
