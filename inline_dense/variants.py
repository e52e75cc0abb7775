"""The published InLine variants and their families: the one table the rest reads.

A variant is one entry of :data:`VARIANTS` (its family, the family's ``arch_zoo`` preset, and the
authors' ImageNet-1K file: URL and top-1) plus that preset in the family's ``arch_zoo``. From it:

- the ``inline://<name>`` short names and their published files (``checkpoint.sources.PUBLISHED``,
  the local file name :func:`file_name`);
- the classifiers (``models.classifier``: family, preset, final norm, first conv) and the timm /
  smp registrations;
- the converter's family detection (:data:`FAMILIES` ``key_patterns``);
- the benchmark zoo (``analysis.zoo``: :func:`zoo_name`, :attr:`Family.baseline`).

Plain data, no torch: every layer of the package can import it.
"""
import re
from typing import Dict, Iterable, NamedTuple, Optional, Tuple


class Family(NamedTuple):
    """What the variants of one backbone class share."""
    title: str                    # 'Swin': InLine-Swin-T, ...
    class_name: str               # the backbone class in inline_dense.models
    final_norm: bool              # the authors' classifier normalises the last stage before pooling
    first_conv: str               # the classifier's first convolution (timm's ``first_conv``)
    baseline: Optional[str]       # the mmdet softmax backbone the benchmark builds to the same preset
    key_patterns: Tuple[str, ...]  # regexes (re.search) over checkpoint keys that only this family has


class Variant(NamedTuple):
    """A published variant: ``arch`` is a preset of its family's ``arch_zoo``."""
    family: str
    arch: str
    url: Optional[str]  # the authors' file (LeapLabTHU/InLine README); None: local files / the cache only
    top1: float         # the authors' ImageNet-1K top-1 at 224x224, percent


# In detection order: the first family with a matching key wins.
FAMILIES: Dict[str, Family] = {
    'cswin': Family('CSwin', 'InLineCSwin', True, 'backbone.stem.conv', None,
                    (r'^stage1_conv_embed\.', r'^stem\.conv\.')),
    'swin': Family('Swin', 'InLineSwin', True, 'backbone.patch_embed.proj', 'swin',
                   (r'^layers\.', r'\.downsample\.reduction\.')),
    'pvt': Family('PVT', 'InLinePVT', False, 'backbone.stages.0.patch_embed.proj', 'pvt',
                  (r'^block1\.', r'^patch_embed1\.', r'^pos_embed1', r'^stages\.\d+\.pos_embed')),
}

_TSINGHUA = 'https://cloud.tsinghua.edu.cn/f/{}/?dl=1'
VARIANTS: Dict[str, Variant] = {
    'inline_swin_t': Variant('swin', 'tiny', _TSINGHUA.format('32810869fcc34410966b'), 82.4),
    'inline_swin_s': Variant('swin', 'small', _TSINGHUA.format('e9657fd247c04c7cb1a1'), 83.6),
    'inline_swin_b': Variant('swin', 'base', _TSINGHUA.format('bf23564bb64c420aafe1'), 84.1),
    'inline_pvt_t': Variant('pvt', 'tiny', _TSINGHUA.format('90ac52b1555b401eb5e6'), 78.2),
    'inline_pvt_s': Variant('pvt', 'small', _TSINGHUA.format('1ab953b2479d433080a3'), 82.0),
    'inline_pvt_m': Variant('pvt', 'medium', _TSINGHUA.format('a72aec31e6084bc0a280'), 83.2),
    'inline_pvt_l': Variant('pvt', 'large', _TSINGHUA.format('efd91318ba964f01b288'), 83.6),
    'inline_cswin_t': Variant('cswin', 'tiny', _TSINGHUA.format('49fa2ecc543647c4b970'), 83.2),
    'inline_cswin_s': Variant('cswin', 'small', _TSINGHUA.format('59f4e65f776f4052b93c'), 83.8),
    'inline_cswin_b': Variant('cswin', 'base', _TSINGHUA.format('91e17121df284ae38521'), 84.5),
}

EXAMPLE = next(iter(VARIANTS))
"""The variant error messages and docstrings name as an example."""


def variant(name: str) -> Variant:
    """The entry of ``name``; ValueError naming the known ones otherwise."""
    if name not in VARIANTS:
        raise ValueError(f'unknown InLine variant {name!r}; use one of {sorted(VARIANTS)}.')
    return VARIANTS[name]


def title(name: str) -> str:
    """``'inline_swin_t'`` -> ``'InLine-Swin-T'``."""
    return f'InLine-{FAMILIES[VARIANTS[name].family].title}-{name.rsplit("_", 1)[1].upper()}'


def file_name(name: str) -> str:
    """The local file name of a variant's weights (``checkpoints/<file>``, the cache's hand-placed file)."""
    return f'{name}.pth'


def zoo_name(name: str, baseline: bool = False) -> Optional[str]:
    """The benchmark's name: ``'inline-swin-t'``, or with ``baseline`` the mmdet softmax model of the
    same preset (``'swin-t'``; None for a family without one)."""
    size = name.rsplit('_', 1)[1]
    family = FAMILIES[VARIANTS[name].family]
    if baseline:
        return f'{family.baseline}-{size}' if family.baseline else None
    return f'inline-{VARIANTS[name].family}-{size}'


def family_of_class(class_name: str) -> Optional[str]:
    """``'InLinePVT'`` -> ``'pvt'``; None for another class."""
    return next((f for f, spec in FAMILIES.items() if spec.class_name == class_name), None)


def example_of(family: Optional[str]) -> str:
    """The first published variant of ``family`` (for messages), else :data:`EXAMPLE`."""
    return next((n for n, v in VARIANTS.items() if v.family == family), EXAMPLE)


def example_of_class(class_name: str) -> str:
    """The smallest published variant of a backbone class (``'InLinePVT'`` -> ``'inline_pvt_t'``)."""
    return example_of(family_of_class(class_name))


def detect_family(keys: Iterable[str]) -> Optional[str]:
    """The family whose ``key_patterns`` match one of ``keys`` (authors' layout or ours), in
    :data:`FAMILIES` order; None when none does."""
    keys = list(keys)
    for family, spec in FAMILIES.items():
        if any(re.search(p, k) for p in spec.key_patterns for k in keys):
            return family
    return None
