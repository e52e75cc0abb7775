"""The InLine backbone families, one folder each: ``<name>/spec.py`` (plain data: presets, published
weights, checkpoint key patterns, head facts, outputs; :mod:`inline_dense.registry` lists them),
``<name>/model.py`` (the backbone class), ``<name>/convert.py`` (the authors' checkpoint layout ->
ours) and its own softmax attention. Importing this package imports no torch."""
import importlib
from typing import TYPE_CHECKING

from .spec import FamilySpec

if TYPE_CHECKING:
    from ..layers.backbone import InLineBackboneBase


def backbone_class(spec: FamilySpec) -> 'type[InLineBackboneBase]':
    """The family's backbone class (``spec.class_name`` in ``families/<name>/model.py``), imported on
    first use: the registry stays plain data."""
    cls = getattr(importlib.import_module(spec.model_module), spec.class_name)
    return cls
