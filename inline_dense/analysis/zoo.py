"""The models the benchmark and the FLOP counter know by name, and whole models from configs.

Backbones: ``inline-swin-{t,s,b}``, ``inline-cswin-{t,s,b}``, ``inline-pvt-{t,s,m,l}`` are ours;
``swin-*`` / ``pvt-*`` are mmdet's softmax ``SwinTransformer`` (window 7) and
``PyramidVisionTransformer``. A config path gives a whole mmdet/mmseg model
(:class:`ConfigModel`), labelled by the config's file name without extension.
"""
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

DEFAULT_MODELS = ('inline-swin-t', 'swin-t', 'inline-cswin-t', 'inline-pvt-t', 'pvt-t')

SWIN = {'t': dict(embed_dims=96, depths=(2, 2, 6, 2), num_heads=(3, 6, 12, 24)),
        's': dict(embed_dims=96, depths=(2, 2, 18, 2), num_heads=(3, 6, 12, 24)),
        'b': dict(embed_dims=128, depths=(2, 2, 18, 2), num_heads=(4, 8, 16, 32))}
PVT_LAYERS = {'t': (2, 2, 2, 2), 's': (3, 4, 6, 3), 'm': (3, 4, 18, 3), 'l': (3, 8, 27, 3)}
CSWIN_SIZES = ('t', 's', 'b')
INLINE_ARCH = {'t': 'tiny', 's': 'small', 'b': 'base', 'm': 'medium', 'l': 'large'}


def _inline_swin(size: str) -> nn.Module:
    from inline_dense.models import InLineSwin
    return InLineSwin(INLINE_ARCH[size], drop_path_rate=0.1)


def _inline_cswin(size: str) -> nn.Module:
    from inline_dense.models import InLineCSwin
    return InLineCSwin(INLINE_ARCH[size], drop_path_rate=0.1)


def _inline_pvt(size: str) -> nn.Module:
    from inline_dense.models import InLinePVT
    return InLinePVT(INLINE_ARCH[size], drop_path_rate=0.1)


def _mmdet_swin(size: str) -> nn.Module:
    from mmdet.models.backbones import SwinTransformer
    return SwinTransformer(window_size=7, drop_path_rate=0.1, **SWIN[size])


def _mmdet_pvt(size: str) -> nn.Module:
    from mmdet.models.backbones import PyramidVisionTransformer
    # mmdet's PVT v1 defaults are the paper's (embed 64, heads 1-2-5-8, sr 8-4-2-1, mlp 8-8-4-4).
    return PyramidVisionTransformer(num_layers=list(PVT_LAYERS[size]), drop_path_rate=0.1)


def backbone_zoo() -> Dict[str, Callable[[], nn.Module]]:
    """Name -> builder, in the order the help text lists them."""
    zoo: Dict[str, Callable[[], nn.Module]] = {}
    for s in SWIN:
        zoo[f'inline-swin-{s}'] = lambda s=s: _inline_swin(s)
        zoo[f'swin-{s}'] = lambda s=s: _mmdet_swin(s)
    for s in CSWIN_SIZES:
        zoo[f'inline-cswin-{s}'] = lambda s=s: _inline_cswin(s)
    for s in PVT_LAYERS:
        zoo[f'inline-pvt-{s}'] = lambda s=s: _inline_pvt(s)
        zoo[f'pvt-{s}'] = lambda s=s: _mmdet_pvt(s)
    return zoo


def config_label(config: str) -> str:
    """How a config's model is named in tables and JSON: its file name without extension."""
    return os.path.splitext(os.path.basename(config))[0]


def model_entries(models: Sequence[str], configs: Sequence[str]) -> List[Tuple[str, Optional[str]]]:
    """(label, config path or None) for the named backbones, then the configs."""
    return [(m, None) for m in models] + [(config_label(c), c) for c in configs]


def check_entries(models: Sequence[str], configs: Sequence[str]) -> Optional[str]:
    """A message naming the unknown models / missing config files, or None when all are fine."""
    zoo = backbone_zoo()
    unknown = [m for m in models if m not in zoo]
    if unknown:
        return f'unknown model(s) {unknown}; choose from {sorted(zoo)} or pass --config PATH'
    missing = [c for c in configs if not os.path.isfile(c)]
    if missing:
        return f'config file(s) not found: {missing}'
    return None


def build_backbone(name: str) -> nn.Module:
    zoo = backbone_zoo()
    if name not in zoo:
        raise ValueError(f'unknown model {name!r}; choose from {sorted(zoo)} or pass --config PATH.')
    return zoo[name]()


class ConfigModel(nn.Module):
    """A whole mmdet/mmseg model from a config, called in ``mode='tensor'`` on a plain batch.

    ``forward(x)`` returns the raw head outputs (a nested tuple of tensors); data samples
    carrying the image sizes are made up for the batch, so no dataset is needed.
    """

    def __init__(self, config_path: str) -> None:
        super().__init__()
        from mmengine.config import Config
        from mmengine.registry import init_default_scope
        from mmengine.utils import import_modules_from_strings
        cfg = Config.fromfile(config_path)
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
        self.sample_type = Sample
        self.scope = scope

    def samples(self, x: torch.Tensor) -> List[Any]:
        h, w = x.shape[-2:]
        meta = dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w), batch_input_shape=(h, w),
                    scale_factor=(1.0, 1.0))
        return [self.sample_type(metainfo=meta) for _ in range(x.shape[0])]

    def forward(self, x: torch.Tensor) -> Any:
        return self.model(x, self.samples(x), mode='tensor')


def build_model(name: Optional[str] = None, config: Optional[str] = None) -> nn.Module:
    """A backbone by zoo name, or the whole model of an mmdet/mmseg config."""
    if config is not None:
        if not os.path.isfile(config):
            raise FileNotFoundError(f'config {config!r} does not exist; pass a path to an mmdet/mmseg config.')
        return ConfigModel(config)
    if name is None:
        raise ValueError('give a model name or a config path.')
    return build_backbone(name)


def init_model(model: nn.Module) -> None:
    """Random initialisation as the model defines it (no checkpoint is loaded)."""
    init = getattr(model, 'init_weights', None)
    if callable(init):
        try:
            init()
        except Exception as err:  # a 'Pretrained' init_cfg points at a file we do not have
            print(f'[benchmark] init_weights skipped ({type(err).__name__}: {err}); using default init',
                  file=sys.stderr)
