"""The published InLine variants: the one table the rest reads, a view over the family specs.

A variant is one published checkpoint of a family (:class:`inline_dense.families.spec.Weights` in its
spec's ``weights``): its family, the family preset it was trained with, and the authors' ImageNet-1K
file (URL and top-1). The families themselves are listed in :mod:`inline_dense.registry`. From this
table:

- the ``inline://<name>`` short names and their published files (``checkpoint.sources.PUBLISHED``,
  the local file name :func:`file_name`);
- the classifiers (``models.classifier``) and the timm / smp registrations;
- the benchmark zoo (``analysis.zoo``: :func:`zoo_name`).

Plain data, no torch: every layer of the package can import it.
"""
from collections.abc import Iterable
from typing import NamedTuple

from . import registry
from .families.spec import FamilySpec, Weights

FAMILIES: dict[str, FamilySpec] = registry.FAMILIES
"""The families by name (:data:`inline_dense.registry.FAMILIES`)."""


class Variant(NamedTuple):
    """A published variant: ``arch`` is a preset of its family's ``presets`` (the model's ``arch_zoo``)."""
    family: str
    arch: str
    url: str | None  # the authors' file (LeapLabTHU/InLine README); None: local files / the cache only
    top1: float         # the authors' ImageNet-1K top-1, percent
    weights: Weights    # the spec's entry: evaluation size, mean / std, ...


VARIANTS: dict[str, Variant] = {}
"""Every published variant by name, in the registry's order (a family registered later joins)."""
registry.follow(lambda spec: VARIANTS.update({w.name: Variant(spec.name, w.preset, w.url, w.top1, w)
                                              for w in spec.weights}))

EXAMPLE = next(iter(VARIANTS))
"""The variant error messages and docstrings name as an example."""


def variant(name: str) -> Variant:
    """The entry of ``name``; :class:`inline_dense.registry.UnknownNameError` naming the known ones otherwise."""
    return registry.lookup('variant', name, VARIANTS)


def spec_of(name: str) -> FamilySpec:
    """The family spec of variant ``name``."""
    return FAMILIES[variant(name).family]


def title(name: str) -> str:
    """``'inline_swin_t'`` -> ``'InLine-Swin-T'``."""
    return f'InLine-{FAMILIES[VARIANTS[name].family].title}-{VARIANTS[name].weights.size.upper()}'


def file_name(name: str) -> str:
    """The local file name of a variant's weights (``checkpoints/<file>``, the cache's hand-placed file)."""
    return f'{name}.pth'


def zoo_name(name: str, baseline: bool = False) -> str | None:
    """The benchmark's name: ``'inline-swin-t'``, or with ``baseline`` the mmdet softmax model of the
    same preset (``'swin-t'``; None for a family without one)."""
    entry = VARIANTS[name]
    size = entry.weights.size
    if baseline:
        spec = FAMILIES[entry.family].baseline
        return f'{spec.name}-{size}' if spec else None
    return f'inline-{entry.family}-{size}'


def zoo_defaults() -> tuple[str, ...]:
    """The benchmark's default backbones: each family's first variant, then the mmdet softmax backbone
    of its preset where the family has one (``('inline-swin-t', 'swin-t', ...)``)."""
    firsts = [spec.weights[0].name for spec in FAMILIES.values()]
    return tuple(n for first in firsts for n in (zoo_name(first), zoo_name(first, baseline=True)) if n)


def zoo_summary() -> str:
    """Every benchmark backbone name, the sizes of a prefix in braces: ``'inline-swin-{t,s,b}, ...,
    swin-{t,s,b}, ...'`` (ours first, then the mmdet softmax baselines)."""
    sizes: dict[str, list[str]] = {}
    for baseline in (False, True):
        for name in VARIANTS:
            zoo = zoo_name(name, baseline=baseline)
            if zoo is not None:
                prefix, size = zoo.rsplit('-', 1)
                sizes.setdefault(prefix, []).append(size)
    return ', '.join(f'{prefix}-{{{",".join(found)}}}' for prefix, found in sizes.items())


def family_of_class(class_name: str) -> str | None:
    """``'InLinePVT'`` -> ``'pvt'``; None for another class."""
    spec = registry.family_of_class(class_name)
    return spec.name if spec else None


def example_of(family: str | None) -> str:
    """The first published variant of ``family`` (for messages), else :data:`EXAMPLE`."""
    return next((n for n, v in VARIANTS.items() if v.family == family), EXAMPLE)


def example_of_class(class_name: str) -> str:
    """The smallest published variant of a backbone class (``'InLinePVT'`` -> ``'inline_pvt_t'``)."""
    return example_of(family_of_class(class_name))


def detect_family(keys: Iterable[str]) -> str | None:
    """The family whose key patterns match one of ``keys`` (:func:`inline_dense.registry.detect_family`)."""
    return registry.detect_family(keys)
