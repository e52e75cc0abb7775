"""Which evaluation of InLine attention runs in a model someone else built.

``InLineAttention`` takes its evaluation as the constructor argument ``impl`` (see
``inline_dense.layers.inline_attention.IMPLS``: 'auto', 'reference', 'folded_gram',
'folded_keys'); every one computes the same function. Whatever backbone holds the InLine layers
(Swin, PVT, CSwin blocks), :func:`inline_impl` switches each for a while and puts it back: the FLOP
counter counts on the textbook path, the ONNX export falls back to another evaluation.
"""
from collections.abc import Iterator
from contextlib import contextmanager

from torch import nn

from ..layers.inline_attention import IMPLS, InLineAttention


def inline_layers(model: nn.Module) -> list[nn.Module]:
    """Every ``InLineAttention`` inside ``model`` (``model`` itself included)."""
    return [m for m in model.modules() if isinstance(m, InLineAttention)]


@contextmanager
def inline_impl(model: nn.Module, impl: str | None) -> Iterator[None]:
    """Runs every ``InLineAttention`` inside ``model`` with ``impl`` while active, then puts
    each back as it was; ``impl=None`` changes nothing."""
    if impl is not None and impl not in IMPLS:
        raise ValueError(f'unknown InLine implementation {impl!r}; choose from {list(IMPLS)}.')
    changed: list[tuple[nn.Module, str]] = []
    if impl is not None:
        for module in inline_layers(model):
            changed.append((module, module.impl))
            module.impl = impl
    try:
        yield
    finally:
        for module, before in changed:
            module.impl = before
