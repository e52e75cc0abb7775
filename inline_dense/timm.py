"""Registers the published InLine models with timm: ``import inline_dense.timm`` once, then
``timm.create_model(name, pretrained=..., num_classes=..., features_only=...)``.

timm has no plugin discovery, hence the import. The names are those of ``inline://``
(:data:`inline_dense.variants.VARIANTS`); each has one pretrained tag, ``.in1k``, the authors'
ImageNet-1K checkpoint.

- Classification: :class:`~inline_dense.models.classifier.InLineClassifier`, the authors' model
  (logits equal to theirs).
- ``features_only=True``: timm's feature getter (``forward_intermediates``), NCHW maps at the
  backbone's output strides (a pyramid's stages: 4, 8, 16, 32; InLine-DeiT's blocks: 16 each) at any
  input size; ``out_indices`` picks among the outputs (by default, as timm's own: a pyramid's every
  stage, InLine-DeiT's last three blocks; see :func:`default_out_indices`), one ``feature_info`` entry
  per output.
- InLine-DeiT (``inline_deit_t/s/b``) keeps timm's ``VisionTransformer`` contract: ``forward_features``
  gives the normalised tokens (B, 1 + h*w, C), cls token first; ``global_pool`` 'token' (default),
  'avg', 'max', 'avgmax' or ''; any input size, as ``dynamic_img_size=True`` gives a timm ViT (the
  position grid resampled bicubically).
- ``pretrained=True``: the weights the pretrained cfg names, in timm's order (``state_dict``,
  ``file``, ``hf_hub_id``, ``url``; see :func:`pretrained_file`), read by inline_dense (the authors'
  URL as its ``inline://`` name: ``checkpoints/<name>.pth``, the cache, else a download; a safe
  unpickler; EMA weights when present) and loaded by the one strict loader as the model is built
  (see :func:`_loading`; timm adapts nothing after it):
  NaN / inf and integer-typed weights are refused, a head of another class count is dropped with a
  log line, a first convolution is adapted to ``in_chans``. Offline:
  ``pretrained_cfg_overlay=dict(file='/path/to/authors.pth')``.
- ``feature_cls='hook'`` reads the stages' outputs at ``backbone.taps.i``; ``feature_cls='fx'``
  traces with the attentions as leaf modules (registered here with timm's notrace lists);
  ``output_fmt='NHWC'`` with the getter.
- ``img_size`` sets the pretrained cfg's ``input_size`` (so ``resolve_data_config`` follows it) and
  InLine-DeiT's position grid (``pretrain_img_size``; the checkpoint's grid is resampled to it on load,
  with a log line, as timm's ``resample_abs_pos_embed``); ``dynamic_img_size``, ``strict_img_size``
  are accepted and ignored (any input size works);
  ``output_stride`` other than the backbone's own (32 for a pyramid, 16 for InLine-DeiT) raises
  ``ValueError`` (no dilated variant exists).
"""
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import timm  # noqa: F401  (the package this module plugs into)
import torch
from huggingface_hub.utils import EntryNotFoundError
from timm.models import (
    build_model_with_cfg,
    generate_default_cfgs,
    register_model,
    register_notrace_function,
    register_notrace_module,
)
from timm.models._features import FeatureGetterNet
from timm.models._hub import HF_SAFE_WEIGHTS_NAME, HF_WEIGHTS_NAME, download_from_hf, has_hf_hub

from . import registry, variants
from .checkpoint import PUBLISHED, SCHEME, Advice, CheckpointError, DownloadError, resolve
from .families.spec import FamilySpec, Output
from .layers.arch import to_2tuple_size
from .models.classifier import VARIANTS, InLineClassifier, check_output_stride
from .models.tracing import FX_AUTOWRAP_FUNCTIONS, FX_LEAF_MODULES

SOURCE = 'https://github.com/LeapLabTHU/InLine'
PAPER = 'https://arxiv.org/abs/2412.06590'


def _outputs(variant: str, overrides: Mapping[str, Any] | None = None) -> tuple[Output, ...]:
    """The outputs of the variant's preset (its family spec's ``outputs``), with the preset's keys that
    ``overrides`` (the model's arguments) set (a plain ViT gives one output per block: ``depth``)."""
    entry, spec = variants.variant(variant), variants.spec_of(variant)
    preset = spec.presets[entry.arch]
    given = {k: v for k, v in (overrides or {}).items() if k in preset and v is not None}
    return spec.preset_outputs(dict(preset, **given))


def _cfg(variant: str) -> dict[str, Any]:
    """The authors' evaluation, as the family spec's weights give it (the Swin codebase's
    ``TEST.CROP`` for all so far: resize to 256x256 (squash), centre crop 224, bicubic, ImageNet mean
    / std)."""
    weights, spec = variants.variant(variant).weights, variants.spec_of(variant)
    size, stride = weights.input_size, _outputs(variant)[-1].stride
    return dict(url=PUBLISHED[variant].url, custom_load=True, num_classes=1000, input_size=(3, size, size),
                pool_size=(size // stride, size // stride), crop_pct=weights.crop_pct, crop_mode=weights.crop_mode,
                interpolation=weights.interpolation, fixed_input_size=False, mean=weights.mean, std=weights.std,
                first_conv=spec.head.first_conv, classifier='head', license='mit',
                origin_url=SOURCE, paper_ids=PAPER, notes=(f'{PUBLISHED[variant].title}, ImageNet-1K top-1 '
                                                           f'{PUBLISHED[variant].top1}% (the authors\' figure).',))


default_cfgs: dict[str, Any] = {}  # per variant, timm's DefaultCfg (register_model reads it): _register_family


ADVICE_ARG = 'checkpoint_advice'
"""The ``create_model`` argument another adapter passes its own :class:`Advice` in (smp's encoders)."""


def timm_advice(variant: str) -> Advice:
    """The errors' ending for a timm user."""
    return Advice(f'pass a file you downloaded yourself: timm.create_model({variant!r}, pretrained=True, '
                  f'pretrained_cfg_overlay=dict(file=\'/path/to/{variants.file_name(variant)}\'))',
                  'pretrained=False for random weights')


def _given_cfg(pretrained_cfg: Any) -> dict[str, Any]:
    """A ``pretrained_cfg`` argument as a dict (a tag string or None: nothing of its own)."""
    if isinstance(pretrained_cfg, dict):
        return dict(pretrained_cfg)
    return pretrained_cfg.to_dict() if hasattr(pretrained_cfg, 'to_dict') else {}


def _hf_hub_file(hf_hub_id: str, filename: str | None) -> str:
    """The local copy of the hub file, as timm picks it: ``hf_hub_filename``, else the safetensors
    file, else ``pytorch_model.bin``."""
    if filename:
        return download_from_hf(hf_hub_id, filename)
    try:
        return download_from_hf(hf_hub_id, HF_SAFE_WEIGHTS_NAME)
    except EntryNotFoundError:
        return download_from_hf(hf_hub_id, HF_WEIGHTS_NAME)


def pretrained_file(variant: str, cfg: dict[str, Any], advice: Advice | None = None) -> str | dict:
    """The weights ``cfg`` (the registry's, ``pretrained_cfg`` and ``pretrained_cfg_overlay`` merged)
    names, in timm's order (``_resolve_pretrained_source``): ``state_dict``, ``file``, ``hf_hub_id``,
    ``url``; as a local file through inline_dense's resolution (the authors' URL: the ``inline://``
    name, so ``checkpoints/`` and the cache serve it; another URL: our verified cache; ``file://``:
    its path). Raises ValueError when there is none. ``advice``: the caller's terms for a failed
    download's hint (default timm's)."""
    advice = advice or timm_advice(variant)
    if cfg.get('state_dict'):
        return cfg['state_dict']
    if cfg.get('file'):
        return resolve(cfg['file'], advice=advice)
    if cfg.get('hf_hub_id') and has_hf_hub(necessary=False):
        return _hf_hub_file(cfg['hf_hub_id'], cfg.get('hf_hub_filename'))
    if cfg.get('url'):
        return resolve(SCHEME + variant if cfg['url'] == PUBLISHED[variant].url else cfg['url'], advice=advice)
    raise ValueError(f'{variant}: pretrained=True, but the pretrained_cfg names no weights (file, url, hf_hub_id '
                     f'or state_dict).')


def _loading(weights: str | Mapping[str, torch.Tensor], advice: Advice) -> Callable[..., InLineClassifier]:
    """The model class for timm's builder given the pretrained weights (a local file, or a
    ``pretrained_cfg['state_dict']``): it builds the model and loads them through the strict loader
    (first convolution adapted to ``in_chans``, a head of another class count dropped), its errors
    ending with ``advice``, before timm's feature wrapper.

    timm itself would load a state dict through a ``pretrained_filter_fn`` and then redo, on the
    filter's output, what the loader already did: adapt the first convolution from the
    ``input_size`` channels and drop the head for another ``num_classes``; on a stem the loader had
    adapted it warns that the weights do not match ``input_size`` (or, in older timm, that it
    could not convert them). Its ``custom_load`` route for files (``model.load_pretrained(file)``)
    could not pass the caller's advice."""
    def build(**kwargs: Any) -> InLineClassifier:
        model = InLineClassifier(**kwargs)
        model.load_pretrained(weights, advice=advice)
        return model
    return build


def _create(variant: str, pretrained: bool = False, **kwargs: Any) -> InLineClassifier:
    advice: Advice = kwargs.pop(ADVICE_ARG, None) or timm_advice(variant)
    check_output_stride(kwargs.pop('output_stride', None), variant, [o.stride for o in _outputs(variant)])
    overlay = {**_sized_cfg(variant, kwargs.get('img_size')), **(kwargs.pop('pretrained_cfg_overlay', None) or {})}
    model_cls: Callable[..., InLineClassifier] = InLineClassifier
    if pretrained:
        cfg = {**_cfg(variant), **_given_cfg(kwargs.get('pretrained_cfg')), **overlay}
        try:
            found = pretrained_file(variant, cfg, advice)
        except (OSError, DownloadError, ValueError, CheckpointError) as exc:  # no file, no network, bad URL
            said = advice.other_file in str(exc)  # a download's hint names it already (checkpoint.sources)
            raise type(exc)(f'{exc}\n' + (f'Or {advice.no_weights}.' if said else advice.ending())) from exc
        model_cls = _loading(found, advice)  # loaded as the model is built; timm loads nothing
        if not isinstance(found, dict):
            overlay['file'] = found  # the pretrained cfg names the file the weights came from
    if kwargs.get('features_only'):  # its head would be pruned: built without one, a checkpoint's is unused
        kwargs['num_classes'] = 0
    family, arch = VARIANTS[variant]
    return build_model_with_cfg(model_cls, variant, False, pretrained_cfg_overlay=overlay,
                                feature_cfg=_feature_cfg(variant, kwargs), family=family, arch=arch, **kwargs)


def _sized_cfg(variant: str, img_size: Any) -> dict[str, Any]:
    """The pretrained cfg's ``input_size`` and ``pool_size`` for ``img_size`` (none when not given), so
    that ``resolve_data_config`` builds transforms of the size the model was made for."""
    if img_size is None:
        return {}
    h, w = to_2tuple_size(img_size, 'img_size', f'timm.create_model({variant!r})')
    stride = _outputs(variant)[-1].stride
    return dict(input_size=(_cfg(variant)['input_size'][0], h, w), pool_size=(-(-h // stride), -(-w // stride)))


class InLineFeatureGetter(FeatureGetterNet):
    """timm's feature getter whose ``forward`` is typed a list of maps: TorchScript (smp's scripted
    ``tu-`` encoders) iterates over it, which it cannot over ``forward_intermediates``'s results."""

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        indices: list[int] = getattr(self, 'out_indices')  # noqa: B009  (a list once pruned; typed wider by timm)
        if not torch.jit.is_scripting():
            indices = self._returned_indices()
        # forward_intermediates(intermediates_only=True)'s maps, by the method of one return type
        # (a submodule's method: typed Tensor | Module by nn.Module's __getattr__)
        _, maps, _ = self.model.intermediate_maps(  # type: ignore[operator]
            x, indices=indices, norm=self.norm, output_fmt=self.output_fmt)
        return maps

    @torch.jit.unused
    def _returned_indices(self) -> list[int]:
        """``out_indices``, or the indices of timm's ``return_layers`` where a caller set them (the
        dict-returning feature nets read it; transformers' ``TimmBackbone`` sets every layer for
        ``output_hidden_states=True``, then indexes the result by ``out_indices``)."""
        layers = self.__dict__.get('return_layers')
        if isinstance(layers, Mapping) and layers:
            return sorted(int(i) for i in layers.values())
        return list(cast(Sequence[int], self.out_indices))

    @torch.jit.ignore
    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Recompute every block in backward, as timm's feature models offer (the model's)."""
        self.model.set_grad_checkpointing(enable)  # type: ignore[operator]


def default_out_indices(variant: str, kwargs: Mapping[str, Any] | None = None) -> tuple[int, ...]:
    """``features_only``'s outputs when ``out_indices`` is not given, as timm's own models: a pyramid's
    every stage; a plain ViT's last three blocks (timm's ``VisionTransformer``: ``out_indices=3``)."""
    count = len(_outputs(variant, kwargs))
    return tuple(range(max(count - 3, 0) if variants.spec_of(variant).plain else 0, count))


def _feature_cfg(variant: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """timm's ``feature_cfg`` (the getter over every output, ``InLineFeatureGetter``); with
    ``features_only``, takes ``output_fmt`` out of the model's arguments into it (the getter gives
    'NCHW' or 'NHWC' maps)."""
    cfg: dict[str, Any] = dict(feature_cls=InLineFeatureGetter, out_indices=default_out_indices(variant, kwargs))
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


def _register_family(spec: FamilySpec) -> None:
    """The family's variants as timm models, each with its pretrained cfg (every family of the
    registry, and each one registered later)."""
    default_cfgs.update(generate_default_cfgs({f'{w.name}.in1k': _cfg(w.name) for w in spec.weights}))
    for weights in spec.weights:
        globals()[weights.name] = register_model(_entrypoint(weights.name))


registry.follow(_register_family)

# timm's FX feature extraction (feature_cls='fx', its tests' tracer): the attentions stay leaf
# modules and the size-dependent helpers stay calls (see inline_dense.models.tracing)
for _module in FX_LEAF_MODULES:
    register_notrace_module(_module)
for _function in FX_AUTOWRAP_FUNCTIONS:
    register_notrace_function(_function)

__all__ = ['default_cfgs', *VARIANTS]
