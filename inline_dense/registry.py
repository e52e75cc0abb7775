"""The backbone families: THE list of them, and lookups over their specs.

Plain data, no torch: every layer of the package can read it. A family is one folder,
``inline_dense/families/<name>/`` (``spec.py``: its facts; ``model.py``: its backbone class), and one
entry in :data:`FAMILIES` below. The variant table (:mod:`inline_dense.variants`), the ``inline://``
names, every ecosystem adapter, the benchmark zoo, the config bases and the contract tests are derived
from it. ``docs/adding_a_family.md`` walks through adding one.

A family defined outside the package joins at run time with :func:`register` (its spec's
``model_in`` names the module of its backbone class); the tables built from the registry
(:func:`follow`) and the adapters' own registries (timm's models, mmengine's ``MODELS``) take it
as they took the families above.
"""
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from .families.cswin import spec as cswin
from .families.deit import spec as deit
from .families.pvt import spec as pvt
from .families.spec import FamilySpec, Weights
from .families.swin import spec as swin

# One line per family. The order is the variant table's (its first variant, InLine-Swin-T, is the
# example the messages name) and the checkpoint detection's; no checkpoint matches two families' key
# patterns (tests/families).
FAMILIES: dict[str, FamilySpec] = {module.SPEC.name: module.SPEC for module in (
    swin,
    pvt,
    cswin,
    deit,
)}

EXAMPLE_FAMILY = next(iter(FAMILIES))
"""The family defaults and messages name as an example (the first)."""


T = TypeVar('T')


class UnknownNameError(ValueError):
    """A family, variant or backbone class name that the registry does not know."""


_followers: list[Callable[[FamilySpec], None]] = []


def follow(add: Callable[[FamilySpec], None]) -> None:
    """Runs ``add(spec)`` for every family now, in :data:`FAMILIES` order, and for each family
    :func:`register` adds later: how a table built from the families (the variants, the ``inline://``
    names) or an adapter's own registry (timm's models, OpenMMLab's backbones) takes them all."""
    _followers.append(add)
    for spec in list(FAMILIES.values()):
        add(spec)


def register(spec: FamilySpec) -> None:
    """Adds a family defined outside the package (a plugin's, a test's) to :data:`FAMILIES`, last;
    everything :func:`follow` builds takes it. For the rest of the process: as timm's models and
    mmengine's modules, a family is not unregistered. A name, class name or variant name already
    taken raises ValueError."""
    published = {w.name for _, w in all_weights()}
    clash = (f'name {spec.name!r}' if spec.name in FAMILIES
             else f'class name {spec.class_name!r}' if family_of_class(spec.class_name)
             else next((f'variant name {w.name!r}' for w in spec.weights if w.name in published), None))
    if clash:
        raise ValueError(f'registry.register: the {clash} of the family {spec.name!r} is taken by a registered '
                         f'family; give it another one.')
    FAMILIES[spec.name] = spec
    for add in _followers:
        add(spec)


def lookup(kind: str, name: str, table: Mapping[str, T]) -> T:
    """``table[name]``: THE name check of families, variants and backbone classes. An unknown name
    raises :class:`UnknownNameError`: one line with the kind, the name and the sorted known names."""
    if name not in table:
        raise UnknownNameError(f'unknown InLine {kind} {name!r}; use one of {sorted(table)}.')
    return table[name]


def family(name: str) -> FamilySpec:
    """The spec of family ``name`` ('swin', ...); :class:`UnknownNameError` naming the known ones otherwise."""
    return lookup('family', name, FAMILIES)


def family_of_class(class_name: str) -> FamilySpec | None:
    """``'InLinePVT'`` -> the PVT spec; None for another class."""
    return next((spec for spec in FAMILIES.values() if spec.class_name == class_name), None)


def family_by_class(class_name: str) -> FamilySpec:
    """``'InLinePVT'`` -> the PVT spec; :class:`UnknownNameError` naming the backbone classes otherwise."""
    return lookup('backbone class', class_name, {spec.class_name: spec for spec in FAMILIES.values()})


def all_weights() -> Iterator[tuple[FamilySpec, Weights]]:
    """Every published checkpoint with its family, in the variant table's order."""
    for spec in FAMILIES.values():
        for weights in spec.weights:
            yield spec, weights


def detect_family(keys: Iterable[str]) -> str | None:
    """The family whose ``key_patterns`` match one of ``keys`` (authors' layout or ours), in
    :data:`FAMILIES` order; None when none does."""
    keys = list(keys)
    for name, spec in FAMILIES.items():
        if any(re.search(p, k) for p in spec.key_patterns for k in keys):
            return name
    return None
