"""Registers the ten InLine models with timm: ``import inline_dense.timm`` once, then
``timm.create_model('inline_swin_t', pretrained=..., num_classes=..., features_only=...)``.

timm has no plugin discovery, hence the import. The names are those of ``inline://``
(``inline_swin_t/s/b``, ``inline_pvt_t/s/m/l``, ``inline_cswin_t/s/b``); each has one pretrained
tag, ``.in1k``, the authors' ImageNet-1K checkpoint.

- Classification: :class:`~inline_dense.models.classifier.InLineClassifier`, the authors' model
  (logits equal to theirs).
- ``features_only=True``: timm's feature getter (``forward_intermediates``), NCHW maps at strides
  4, 8, 16, 32 at any input size; ``out_indices`` picks stages 0-3.
- ``pretrained=True``: the authors' file through inline_dense's own reading (``inline://`` name:
  ``checkpoints/<name>.pth``, the cache, else a download; a safe unpickler; EMA weights when
  present), handed to timm as ``pretrained_cfg['file']`` with ``custom_load``. Offline:
  ``pretrained_cfg_overlay=dict(file='/path/to/authors.pth')``.
- ``feature_cls='hook'`` reads the stages' outputs at ``backbone.taps.i``; ``feature_cls='fx'``
  traces with the attentions as leaf modules (registered here with timm's notrace lists);
  ``output_fmt='NHWC'`` with the getter.
- ``img_size``, ``dynamic_img_size``, ``strict_img_size`` are accepted and ignored;
  ``output_stride`` other than 32 raises ``ValueError`` (no dilated variant exists).
"""
from typing import Any, Callable, Dict, List

import timm  # noqa: F401  (the package this module plugs into)
import torch
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
from timm.models import (
    build_model_with_cfg,
    generate_default_cfgs,
    register_model,
    register_notrace_function,
    register_notrace_module,
)
from timm.models._features import FeatureGetterNet

from .checkpoint import PUBLISHED, SCHEME, DownloadError, resolve
from .models.classifier import FIRST_CONV, VARIANTS, InLineClassifier, check_output_stride
from .models.tracing import FX_AUTOWRAP_FUNCTIONS, FX_LEAF_MODULES

SOURCE = 'https://github.com/LeapLabTHU/InLine'
PAPER = 'https://arxiv.org/abs/2412.06590'


def _cfg(variant: str) -> Dict[str, Any]:
    """The authors' evaluation: Swin's codebase (``TEST.CROP``): resize to 256x256 (squash), centre
    crop 224, bicubic, ImageNet mean / std."""
    family, _ = VARIANTS[variant]
    return dict(url=PUBLISHED[variant].url, custom_load=True, num_classes=1000, input_size=(3, 224, 224),
                pool_size=(7, 7), crop_pct=224 / 256, crop_mode='squash', interpolation='bicubic',
                fixed_input_size=False, mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD,
                first_conv=FIRST_CONV[family], classifier='head', license='mit', origin_url=SOURCE,
                paper_ids=PAPER, notes=(f'{PUBLISHED[variant].title}, ImageNet-1K top-1 '
                                        f'{PUBLISHED[variant].top1}% (the authors\' figure).',))


default_cfgs = generate_default_cfgs({f'{v}.in1k': _cfg(v) for v in VARIANTS})


def _has_file(cfg: Any) -> bool:
    return isinstance(cfg, dict) and bool(cfg.get('file') or cfg.get('state_dict'))


def _create(variant: str, pretrained: bool = False, **kwargs: Any) -> InLineClassifier:
    check_output_stride(kwargs.pop('output_stride', None), variant)
    overlay = dict(kwargs.pop('pretrained_cfg_overlay', None) or {})
    if pretrained and not (_has_file(overlay) or _has_file(kwargs.get('pretrained_cfg'))):
        # our resolution of the authors' file (their URLs carry no file name for timm's cache)
        try:
            overlay['file'] = resolve(SCHEME + variant)
        except (OSError, DownloadError) as exc:  # FileNotFoundError, a read-only cache, no network
            raise type(exc)(f'{exc}\nWith timm: timm.create_model({variant!r}, pretrained=True, '
                            f'pretrained_cfg_overlay=dict(file=\'/path/to/{variant}.pth\')) reads a file you '
                            f'downloaded yourself.') from exc
    if _has_file(overlay):  # timm turns custom_load off for a new source; the authors' files need ours
        overlay.setdefault('custom_load', True)
    family, arch = VARIANTS[variant]
    return build_model_with_cfg(InLineClassifier, variant, pretrained, pretrained_cfg_overlay=overlay,
                                feature_cfg=_feature_cfg(variant, kwargs), family=family, arch=arch, **kwargs)


class InLineFeatureGetter(FeatureGetterNet):
    """timm's feature getter whose ``forward`` is typed a list of maps: TorchScript (smp's scripted
    ``tu-`` encoders) iterates over it, which it cannot over ``forward_intermediates``'s union."""

    def forward(self, x: torch.Tensor) -> List[torch.Tensor]:
        features = self.model.forward_intermediates(x, indices=self.out_indices, norm=self.norm,
                                                    output_fmt=self.output_fmt, intermediates_only=True)
        if torch.jit.is_scripting():  # torch.jit.isinstance: scripted only (dynamo does not trace it)
            if torch.jit.isinstance(features, List[torch.Tensor]):
                return features
            raise RuntimeError('forward_intermediates(intermediates_only=True) gave no list of maps')
        return features  # eagerly and compiled: the list forward_intermediates gives


def _feature_cfg(variant: str, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """timm's ``feature_cfg`` (the getter over all four stages, ``InLineFeatureGetter``); with
    ``features_only``, takes ``output_fmt`` out of the model's arguments into it (the getter gives
    'NCHW' or 'NHWC' maps)."""
    cfg: Dict[str, Any] = dict(feature_cls=InLineFeatureGetter, out_indices=(0, 1, 2, 3))
    if kwargs.get('feature_cls') == 'getter':
        kwargs['feature_cls'] = InLineFeatureGetter
    if 'output_fmt' not in kwargs:
        return cfg
    fmt = kwargs.pop('output_fmt')
    feature_cls = kwargs.get('feature_cls', InLineFeatureGetter)
    if feature_cls is InLineFeatureGetter:
        feature_cls = 'getter'
    if not kwargs.get('features_only'):
        raise TypeError(f"timm.create_model({variant!r}, output_fmt={fmt!r}): output_fmt applies to "
                        f"features_only=True; forward_features gives (B, C, h, w).")
    if fmt != 'NCHW' and feature_cls != 'getter':
        raise ValueError(f"timm.create_model({variant!r}, features_only=True, feature_cls={feature_cls!r}, "
                         f"output_fmt={fmt!r}): only the feature getter (feature_cls='getter', the default) "
                         f"gives NHWC maps; the {feature_cls!r} features are the stages' NCHW outputs.")
    cfg['output_fmt'] = fmt
    return cfg


def _entrypoint(variant: str) -> Callable[..., InLineClassifier]:
    def create(pretrained: bool = False, **kwargs: Any) -> InLineClassifier:
        return _create(variant, pretrained, **kwargs)
    create.__name__ = create.__qualname__ = variant
    create.__module__ = __name__
    create.__doc__ = f'{PUBLISHED[variant].title} (the authors\' ImageNet-1K model; timm contract).'
    return create


for _variant in VARIANTS:
    globals()[_variant] = register_model(_entrypoint(_variant))

# timm's FX feature extraction (feature_cls='fx', its tests' tracer): the attentions stay leaf
# modules and the size-dependent helpers stay calls (see inline_dense.models.tracing)
for _module in FX_LEAF_MODULES:
    register_notrace_module(_module)
for _function in FX_AUTOWRAP_FUNCTIONS:
    register_notrace_function(_function)

__all__ = ['default_cfgs', *VARIANTS]
