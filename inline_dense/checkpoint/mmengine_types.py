"""Let ``torch.load(weights_only=True)`` read the checkpoints mmengine's Runner writes.

Since torch 2.6, ``torch.load`` defaults to ``weights_only=True``: the unpickler only
builds objects of an allow-list. mmengine 0.10.x calls ``torch.load`` without
``weights_only`` to resume and to test, and its Runner checkpoints hold more than
tensors: the ``message_hub`` state (``HistoryBuffer`` objects whose logs are numpy
arrays, and whose default statistics are pickled as ``getattr(HistoryBuffer, 'mean')``),
numpy scalars (e.g. ``best_score``), and ``collections.Counter`` (scheduler milestones;
torch allows that one already). Loading such a file fails with
``Unsupported global: GLOBAL numpy._core.multiarray._reconstruct``.

:func:`allow_mmengine_checkpoint_types` adds exactly those globals, found by saving a
real Runner checkpoint and reading it back; ``weights_only`` stays on, so a pickle that
names any other global (``os.system``, ``builtins.eval``, ...) is still refused.
``getattr`` is not allowed in general: the name ``builtins.getattr`` maps to
:func:`history_buffer_statistic`, which only returns HistoryBuffer's own statistics.
"""
import pickle
import re
import sys
from typing import Any, Callable, List, Tuple

import numpy as np
import torch

# HistoryBuffer's default statistics methods (HistoryBuffer._set_default_statistics).
HISTORY_BUFFER_STATISTICS = ('min', 'max', 'current', 'mean')
# numpy dtypes a numpy scalar or array in a Runner checkpoint can have: numbers and bools.
NUMERIC_DTYPE_CODES = ('?', 'b', 'B', 'h', 'H', 'i', 'I', 'l', 'L', 'q', 'Q', 'e', 'f', 'd', 'g', 'F', 'D', 'G')

_done = False


def needs_allow_list(torch_version: str) -> bool:
    """Whether this torch's ``torch.load`` defaults to ``weights_only=True`` (torch >= 2.6,
    pre-releases of 2.6 included)."""
    match = re.match(r'(\d+)\.(\d+)', torch_version)
    if match is None:
        raise ValueError(f'cannot read a torch version from {torch_version!r}')
    return (int(match[1]), int(match[2])) >= (2, 6)


def history_buffer_statistic(obj: Any, name: str) -> Callable:
    """Stand-in for ``builtins.getattr`` while unpickling: only ``HistoryBuffer.<stat>``.

    ``HistoryBuffer.__getstate__`` stores its statistics methods, which pickle (protocol 2)
    writes as ``getattr(HistoryBuffer, 'min')`` and so on.
    """
    from mmengine.logging import HistoryBuffer
    if obj is HistoryBuffer and name in HISTORY_BUFFER_STATISTICS:
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(f'refusing getattr({obj!r}, {name!r}) while loading a checkpoint: only '
                     f'HistoryBuffer.{{{",".join(HISTORY_BUFFER_STATISTICS)}}} are allowed. '
                     f'Load only checkpoints you trust; this one holds more than mmengine writes.')


def _numpy_core_names() -> List[Tuple[Callable, str]]:
    """numpy's array/scalar rebuilders under both module paths: ``numpy._core`` (numpy 2)
    and ``numpy.core`` (numpy 1), so files written with either numpy load with either."""
    try:
        from numpy._core import multiarray  # numpy >= 2 (and 1.26's forward shim)
    except ImportError:  # numpy < 1.26
        from numpy.core import multiarray
    pairs = []
    for prefix in ('numpy._core.multiarray', 'numpy.core.multiarray'):
        pairs.append((multiarray._reconstruct, f'{prefix}._reconstruct'))
        pairs.append((multiarray.scalar, f'{prefix}.scalar'))
    return pairs


def mmengine_safe_globals() -> List[Any]:
    """The globals mmengine 0.10's Runner checkpoints need, for ``add_safe_globals``.

    mmengine's ``HistoryBuffer`` only once mmengine is imported (by the OpenMMLab adapter, a
    runner): the torch-only core neither needs nor imports it, and a file that holds one then reads
    it as inert data (``safe_unpickle``); the weights and the numpy types load either way."""
    # Every entry as (object, its pickle name): onedl-mmengine loads inside
    # ``torch.serialization.safe_globals([HistoryBuffer, Float64DType, ...])``, whose exit removes
    # those bare entries from torch's allow-list; named entries are other members and stay.
    dtype_classes = [(cls, f'{cls.__module__}.{cls.__qualname__}')
                     for cls in sorted({type(np.dtype(code)) for code in NUMERIC_DTYPE_CODES}, key=str)]
    mmengine_entries: List[Any] = []
    if 'mmengine' in sys.modules:
        from mmengine.logging import HistoryBuffer
        mmengine_entries = [(HistoryBuffer, f'{HistoryBuffer.__module__}.{HistoryBuffer.__qualname__}'),
                            (history_buffer_statistic, 'builtins.getattr')]
    return [
        *mmengine_entries,
        (np.ndarray, 'numpy.ndarray'),
        (np.dtype, 'numpy.dtype'),
        *dtype_classes,  # BUILD on a dtype checks its concrete class (e.g. Float64DType)
        *_numpy_core_names(),
    ]


def allow_mmengine_checkpoint_types() -> bool:
    """Allow-list mmengine's checkpoint types for ``torch.load(weights_only=True)``.

    Idempotent; does nothing on torch < 2.6, whose ``torch.load`` does not default to
    ``weights_only``. Returns whether the allow-list is in place.
    """
    global _done
    if _done:
        return True
    if not needs_allow_list(torch.__version__):
        return False
    import mmengine.logging  # noqa: F401  (the OpenMMLab side calls this: mmengine's types must be in the list)
    torch.serialization.add_safe_globals(mmengine_safe_globals())
    _done = True
    return True
