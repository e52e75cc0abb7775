"""The backbone families: THE list of them, and lookups over their specs.

Plain data, no torch: every layer of the package can read it. A family is one folder,
``inline_dense/families/<name>/`` (``spec.py``: its facts; ``model.py``: its backbone class), and one
entry in :data:`FAMILIES` below. The variant table (:mod:`inline_dense.variants`), the ``inline://``
names, every ecosystem adapter, the benchmark zoo, the config bases and the contract tests are derived
from it. ``docs/adding_a_family.md`` walks through adding one.
"""
import re
from collections.abc import Iterable, Iterator, Mapping
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
