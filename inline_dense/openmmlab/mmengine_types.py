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
from collections.abc import Callable
from typing import Any

import torch
from mmengine.logging import HistoryBuffer

from ..checkpoint.numpy_types import numpy_safe_globals
from ..checkpoint.pickle_policy import add_allowed_globals

# HistoryBuffer's default statistics methods (HistoryBuffer._set_default_statistics).
HISTORY_BUFFER_STATISTICS = ('min', 'max', 'current', 'mean')

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
    if obj is HistoryBuffer and name in HISTORY_BUFFER_STATISTICS:
        return getattr(HistoryBuffer, name)
    raise pickle.UnpicklingError(f'refusing getattr({obj!r}, {name!r}) while loading a checkpoint: only '
                     f'HistoryBuffer.{{{",".join(HISTORY_BUFFER_STATISTICS)}}} are allowed. '
                     f'Load only checkpoints you trust; this one holds more than mmengine writes.')


def history_buffer_globals() -> list[tuple[Any, str]]:
    """mmengine's own entries, as (object, its pickle name): ``HistoryBuffer`` and the
    ``builtins.getattr`` stand-in for its statistics."""
    return [(HistoryBuffer, f'{HistoryBuffer.__module__}.{HistoryBuffer.__qualname__}'),
            (history_buffer_statistic, 'builtins.getattr')]


def mmengine_safe_globals() -> list[tuple[Any, str]]:
    """The globals mmengine 0.10's Runner checkpoints need, for ``add_safe_globals``: mmengine's
    own (:func:`history_buffer_globals`) and numpy's arrays and scalars
    (:mod:`inline_dense.checkpoint.numpy_types`)."""
    # Every entry as (object, its pickle name): onedl-mmengine loads inside
    # ``torch.serialization.safe_globals([HistoryBuffer, Float64DType, ...])``, whose exit removes
    # those bare entries from torch's allow-list; named entries are other members and stay.
    return [*history_buffer_globals(), *numpy_safe_globals()]


def allow_mmengine_checkpoint_types() -> bool:
    """Allow-list mmengine's checkpoint types for ``torch.load(weights_only=True)``.

    Idempotent; does nothing on torch < 2.6, whose ``torch.load`` does not default to
    ``weights_only``. Returns whether the allow-list is in place. On any torch, inline_dense's own
    reader (``checkpoint.safe_unpickle``) gets mmengine's ``HistoryBuffer`` too.
    """
    global _done
    add_allowed_globals(history_buffer_globals())  # inline_dense's own reader (safe_unpickle), on any torch
    if _done:
        return True
    if not needs_allow_list(torch.__version__):
        return False
    torch.serialization.add_safe_globals(mmengine_safe_globals())
    _done = True
    return True
