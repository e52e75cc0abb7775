"""A stand-in for mmcv's compiled ``mmcv._ext``, built on torchvision's ops and plain torch.

mmcv-lite ships every ``mmcv.ops`` Python file but not the compiled extension they load when
imported (``ext_loader.load_ext('_ext', [...])``). When no compiled ``mmcv._ext`` exists,
:mod:`inline_dense_mmcv_hook` answers ``mmcv._ext`` with THIS MODULE. It follows the compiled
extension's calling convention: the same function names and keyword arguments, outputs written
into the tensors passed in. It runs on CPU and CUDA alike (torchvision ships both kernels).

Served, one module per op family, their input checks shared (:mod:`.checks`, :class:`OpInputError`:
one line naming the argument and the fix, where compiled mmcv would read out of bounds or return
garbage): ``nms`` (:mod:`.nms`), ``roi_align_*`` (:mod:`.roi_align`), ``sigmoid_focal_loss_*`` and
``softmax_focal_loss_*`` (:mod:`.focal_loss`), ``ms_deform_attn_*`` (:mod:`.ms_deform_attn`).

Any other op that the installed ``mmcv.ops`` loads (the names in its ``load_ext`` calls) resolves
to a function that raises :class:`MissingCompiledOpError` when called (``load_ext`` only checks
that the names exist), naming the op and how to get compiled ops. A name mmcv never asks for is
an ``AttributeError``, as on the compiled extension.

This module and its siblings import only torch, torchvision and each other, never the rest of
``inline_dense``: mmcv imports this module while mmdet or mmseg are half imported (their registries
incomplete). ``import inline_dense`` itself is light (the registry's plain data), so the relative
imports below load nothing that registers into OpenMMLab.
"""
import functools
import importlib.util
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from . import focal_loss, ms_deform_attn, roi_align
from . import nms as _nms
from .checks import OpInputError

IS_STAND_IN = True
"""Marks this module as inline_dense's stand-in (the compiled ``mmcv._ext`` has no such name)."""

CALLS: Counter = Counter()
"""How often each op was called through this module in this process (what a run really uses)."""

SERVED = ('nms', 'roi_align_forward', 'roi_align_backward', 'sigmoid_focal_loss_forward',
          'sigmoid_focal_loss_backward', 'softmax_focal_loss_forward', 'softmax_focal_loss_backward',
          'ms_deform_attn_forward', 'ms_deform_attn_backward')

HOW_TO_GET_COMPILED_OPS = (
    'Install mmcv 2.1.0 with its compiled ops instead of mmcv-lite: '
    '`MMCV=full bash tools/setup_env.sh` (compiles mmcv once, ~10-30 min; CUDA ops need a CUDA '
    "toolkit matching torch's), or `pip uninstall mmcv-lite && mim install mmcv==2.1.0`.")


class MissingCompiledOpError(RuntimeError):
    """An mmcv op that needs mmcv's compiled extension, which is not installed."""


def _counted(op: Callable) -> Callable:
    """``op`` with each call counted in :data:`CALLS` under its name."""
    @functools.wraps(op)
    def counted(*args, **kwargs):
        CALLS[op.__name__] += 1
        return op(*args, **kwargs)
    return counted


nms = _counted(_nms.nms)
roi_align_forward = _counted(roi_align.roi_align_forward)
roi_align_backward = _counted(roi_align.roi_align_backward)
sigmoid_focal_loss_forward = _counted(focal_loss.sigmoid_focal_loss_forward)
sigmoid_focal_loss_backward = _counted(focal_loss.sigmoid_focal_loss_backward)
softmax_focal_loss_forward = _counted(focal_loss.softmax_focal_loss_forward)
softmax_focal_loss_backward = _counted(focal_loss.softmax_focal_loss_backward)
ms_deform_attn_forward = _counted(ms_deform_attn.ms_deform_attn_forward)
ms_deform_attn_backward = _counted(ms_deform_attn.ms_deform_attn_backward)


def _missing(name: str) -> Callable:
    def op(*args, **kwargs):
        raise MissingCompiledOpError(
            f"mmcv op '{name}' needs mmcv's compiled extension (mmcv._ext), and this environment "
            f'has mmcv-lite, whose stand-in (inline_dense.ops) serves only {", ".join(SERVED)}. '
            + HOW_TO_GET_COMPILED_OPS)
    op.__name__ = name
    op.__qualname__ = name
    return op


@functools.lru_cache(maxsize=1)
def mmcv_op_names() -> frozenset:
    """The op names the installed ``mmcv.ops`` loads from ``mmcv._ext`` (its ``load_ext`` calls),
    read from its sources without importing it; empty when mmcv is not installed."""
    spec = importlib.util.find_spec('mmcv')
    names: set = set()
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for source in sorted((Path(folder) / 'ops').glob('*.py')):
            for listed in re.findall(r"load_ext\(\s*['\"]_ext['\"]\s*,\s*\[([^\]]*)\]", source.read_text('utf-8')):
                names.update(re.findall(r"['\"](\w+)['\"]", listed))
    return frozenset(names)


def __getattr__(name: str) -> Callable:
    if name in mmcv_op_names():
        return _missing(name)
    raise AttributeError(f'{__name__} (the stand-in for mmcv._ext) has no attribute {name!r}: mmcv.ops never '
                         'asks for it')


__all__ = ['CALLS', 'HOW_TO_GET_COMPILED_OPS', 'IS_STAND_IN', 'SERVED', 'MissingCompiledOpError', 'OpInputError',
           'mmcv_op_names', *SERVED]
