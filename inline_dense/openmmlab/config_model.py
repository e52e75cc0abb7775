"""A whole mmdet/mmseg model from a config, called on a plain image batch (no dataset)."""
import inspect
from typing import Any

import torch
from torch import nn

from .engine.launch import load_config


class UnsupportedConfigModel(ValueError):
    """A config whose model cannot be called on a plain image batch (one line: why, what instead)."""


def tensor_mode_problem(model: nn.Module, config_path: str) -> str | None:
    """Why ``model`` cannot run in ``mode='tensor'`` on an image batch, or None. mmseg's
    ``EncoderDecoder._forward`` calls ``decode_head.forward(features)`` alone; a head whose forward
    needs more (Mask2FormerHead: the data samples) fails there with a signature error."""
    head = getattr(model, 'decode_head', None)
    for h in (list(head) if isinstance(head, nn.ModuleList) else [head] if head is not None else []):
        params = list(inspect.signature(h.forward).parameters.values())[1:]
        needed = [p.name for p in params if p.default is p.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if needed:
            return (f'{config_path}: {type(h).__name__}.forward needs {", ".join(needed)}, which mmseg\'s '
                    f'EncoderDecoder does not pass on an image batch (mode="tensor"), so this model cannot be '
                    f'exported to ONNX, counted or benchmarked whole; use its backbone (e.g. --models '
                    f'inline-swin-t) or a config whose head takes the features alone (UPerNet, Semantic FPN).')
    return None


class ConfigModel(nn.Module):
    """A whole mmdet/mmseg model from a config, called in ``mode='tensor'`` on a plain batch.

    ``forward(x)`` returns the raw head outputs (a nested tuple of tensors); data samples
    carrying the image sizes are made up for the batch, so no dataset is needed.
    """

    def __init__(self, config_path: str, cfg_options: dict[str, Any] | None = None) -> None:
        super().__init__()
        from mmengine.registry import init_default_scope
        from mmengine.utils import import_modules_from_strings
        cfg = load_config(config_path, cfg_options)  # with the tools' ``--cfg-options key=value``
        if cfg.get('custom_imports'):
            import_modules_from_strings(**cfg.custom_imports)
        scope = cfg.get('default_scope', 'mmdet')
        init_default_scope(scope)
        if scope == 'mmseg':
            from mmseg.registry import MODELS
            from mmseg.structures import SegDataSample as Sample
        else:
            from mmdet.registry import MODELS
            from mmdet.structures import DetDataSample as Sample
        model_cfg = cfg.model.copy()
        model_cfg.pop('data_preprocessor', None)  # inputs are made already normalised
        self.model = MODELS.build(model_cfg)
        problem = tensor_mode_problem(self.model, config_path)
        if problem:
            raise UnsupportedConfigModel(problem)
        self.sample_type = Sample
        self.scope = scope

    def samples(self, x: torch.Tensor) -> list[Any]:
        h, w = x.shape[-2:]
        meta = dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w), batch_input_shape=(h, w),
                    scale_factor=(1.0, 1.0))
        return [self.sample_type(metainfo=meta) for _ in range(x.shape[0])]

    def forward(self, x: torch.Tensor) -> Any:
        return self.model(x, self.samples(x), mode='tensor')
