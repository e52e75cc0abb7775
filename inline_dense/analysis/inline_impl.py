"""Which evaluation of InLine attention runs, for the FLOP counter.

``InLineAttention`` takes its evaluation as the constructor argument ``impl`` (see
``inline_dense.models.inline_attention.IMPLS``: 'auto', 'reference', 'folded_gram',
'folded_keys'). The one-layer ablation builds its variants with it. The FLOP counter has to
count a model someone else built, whatever backbone holds its InLine layers (Swin, PVT,
CSwin blocks), on the textbook path: :func:`inline_impl` switches every ``InLineAttention``
in it for the duration of the count and puts each back afterwards.
"""
from contextlib import contextmanager
from typing import Iterator, List, Optional, Tuple

from torch import nn

from ..models.inline_attention import IMPLS, InLineAttention


def inline_layers(model: nn.Module) -> List[nn.Module]:
    """Every ``InLineAttention`` inside ``model`` (``model`` itself included)."""
    return [m for m in model.modules() if isinstance(m, InLineAttention)]


@contextmanager
def inline_impl(model: nn.Module, impl: Optional[str]) -> Iterator[None]:
    """Runs every ``InLineAttention`` inside ``model`` with ``impl`` while active, then puts
    each back as it was; ``impl=None`` changes nothing."""
    if impl is not None and impl not in IMPLS:
        raise ValueError(f'unknown InLine implementation {impl!r}; choose from {list(IMPLS)}.')
    changed: List[Tuple[nn.Module, str]] = []
    if impl is not None:
        for module in inline_layers(model):
            changed.append((module, module.impl))
            module.impl = impl
    try:
        yield
    finally:
        for module, before in changed:
            module.impl = before
