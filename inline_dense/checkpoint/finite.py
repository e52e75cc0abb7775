"""Refusing weights that hold NaN or infinity.

One NaN in a weight makes every output of the layers after it NaN: a detector then predicts
nothing (mmdet reports an empty result, AP 0) and a training run's losses turn NaN at the first
step. Such a file is refused where it is loaded, naming the tensors, instead of being used.
"""
from collections.abc import Mapping
from typing import Any

import torch

from .errors import CheckpointError

SHOWN = 8


class NonFiniteWeightsError(CheckpointError):
    """A checkpoint whose weights hold NaN or infinite values."""


def nonfinite_tensors(state: Mapping[str, Any]) -> list[str]:
    """``'key (n NaN, m inf of N)'`` for every floating-point tensor of ``state`` with a NaN or an
    infinity, in the mapping's order; other entries are ignored."""
    found = []
    for key, value in state.items():
        if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
            continue
        finite = torch.isfinite(value)
        if bool(finite.all()):
            continue
        nan = int(torch.isnan(value).sum())
        found.append(f'{key} ({nan} NaN, {value.numel() - int(finite.sum()) - nan} inf of {value.numel()})')
    return found


def check_finite(state: Mapping[str, Any], source: str, fix: str) -> None:
    """Raises :class:`NonFiniteWeightsError` naming the non-finite tensors of ``state``, read from
    ``source``; ``fix`` ends the message (what to use instead)."""
    bad = nonfinite_tensors(state)
    if bad:
        more = f', ... ({len(bad) - SHOWN} more)' if len(bad) > SHOWN else ''
        raise NonFiniteWeightsError(f'{source} holds non-finite weights (NaN or inf) in {len(bad)} tensor(s): '
                                    f'{", ".join(bad[:SHOWN])}{more}. A model with them outputs NaN. {fix}')
