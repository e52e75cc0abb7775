"""The numpy globals a checkpoint may name, for the restricted unpickler and ``add_safe_globals``.

Runner checkpoints (mmengine) and many training scripts pickle numpy arrays and scalars (e.g. a
``best_score``); building one only makes data. Numbers and bools only: an object array's dtype
(``'O'``) is not among them.
"""
from collections.abc import Callable
from typing import Any

import numpy as np

# numpy dtypes a numpy scalar or array in a checkpoint can have: numbers and bools.
NUMERIC_DTYPE_CODES = ('?', 'b', 'B', 'h', 'H', 'i', 'I', 'l', 'L', 'q', 'Q', 'e', 'f', 'd', 'g', 'F', 'D', 'G')


def _numpy_core_names() -> list[tuple[Callable, str]]:
    """numpy's array/scalar rebuilders under both module paths: ``numpy._core`` (numpy 2)
    and ``numpy.core`` (numpy 1), so files written with either numpy load with either."""
    try:
        from numpy._core import multiarray  # numpy >= 2 (and 1.26's forward shim)
    except ImportError:  # numpy < 1.26
        from numpy.core import multiarray  # type: ignore[no-redef]
    pairs = []
    for prefix in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        pairs.append((multiarray._reconstruct, f'{prefix}._reconstruct'))
        pairs.append((multiarray.scalar, f'{prefix}.scalar'))
    return pairs


def numpy_safe_globals() -> list[tuple[Any, str]]:
    """Every entry as (object, its pickle name): ``ndarray``, ``dtype``, the numeric dtype classes
    and the array/scalar rebuilders."""
    dtype_classes = [(cls, f'{cls.__module__}.{cls.__qualname__}')
                     for cls in sorted({type(np.dtype(code)) for code in NUMERIC_DTYPE_CODES}, key=str)]
    return [
        (np.ndarray, 'numpy.ndarray'),
        (np.dtype, 'numpy.dtype'),
        *dtype_classes,  # BUILD on a dtype checks its concrete class (e.g. Float64DType)
        *_numpy_core_names(),
    ]
