"""The tensors of a model's (nested) outputs."""
from collections.abc import Iterable
from typing import Any

import torch


def tensors_in(obj: Any) -> Iterable[torch.Tensor]:
    """All tensors of a nested tuple/list/dict output."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            yield from tensors_in(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from tensors_in(o)
