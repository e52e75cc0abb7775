"""The models the benchmark and the FLOP counter know by name, and whole models from configs.

Backbones: ``inline-<family>-<size>`` for each variant of :mod:`inline_dense.variants` are ours;
``<baseline>-<size>`` is the mmdet softmax backbone a family's spec names (its ``baseline``), built to the
same preset. A config path gives a whole mmdet/mmseg model
(:class:`inline_dense.openmmlab.config_model.ConfigModel`), labelled by the config's file name without extension.
"""
import functools
import os
import sys
from collections.abc import Callable, Sequence

from torch import nn

from .. import registry, variants
from ..families import backbone_class
from ..families.spec import Baseline, FamilySpec, Preset
from ..openmmlab.config_model import ConfigModel

# each family's smallest variant, then the mmdet softmax backbone of its preset where it has one
DEFAULT_MODELS = variants.zoo_defaults()


def build_inline(spec: FamilySpec, preset: str) -> nn.Module:
    """The family's backbone on ``preset``, with the stochastic depth of the baselines."""
    family: Callable[..., nn.Module] = backbone_class(spec)  # each family has its own arguments
    return family(preset, drop_path_rate=0.1)


def build_baseline(baseline: Baseline, preset: Preset) -> nn.Module:
    """mmdet's softmax backbone ``baseline`` (a family spec's) to ``preset``."""
    # imported here: mmdet is needed only for the softmax baselines
    from mmdet.models import backbones
    return getattr(backbones, baseline.mmdet_class)(**baseline.kwargs(preset))


def backbone_zoo() -> dict[str, Callable[[], nn.Module]]:
    """Name -> builder, in the order the help text lists them: per variant of the table
    (:mod:`inline_dense.variants`; ``inline-<family>-<size>`` is the family's class on the variant's
    preset), then the mmdet softmax backbone of the same preset where the family has one."""
    zoo: dict[str, Callable[[], nn.Module]] = {}
    for name, entry in variants.VARIANTS.items():
        spec = registry.FAMILIES[entry.family]
        zoo[str(variants.zoo_name(name))] = functools.partial(build_inline, spec, entry.arch)
        baseline = variants.zoo_name(name, baseline=True)
        if baseline is not None and spec.baseline is not None:
            zoo[baseline] = functools.partial(build_baseline, spec.baseline, spec.presets[entry.arch])
    return zoo


def config_label(config: str) -> str:
    """How a config's model is named in tables and JSON: its file name without extension."""
    return os.path.splitext(os.path.basename(config))[0]


def model_entries(models: Sequence[str], configs: Sequence[str]) -> list[tuple[str, str | None]]:
    """(label, config path or None) for the named backbones, then the configs."""
    return [(m, None) for m in models] + [(config_label(c), c) for c in configs]


def check_entries(models: Sequence[str], configs: Sequence[str]) -> str | None:
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


def build_model(name: str | None = None, config: str | None = None) -> nn.Module:
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
