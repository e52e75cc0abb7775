"""Which ``mmcv._ext`` ``mmcv.ops`` uses here: mmcv's compiled extension, or inline_dense's
stand-in (:mod:`inline_dense.ops.ext`, served by ``inline_dense_mmcv_hook`` with mmcv-lite)."""
import importlib
from types import ModuleType


def mmcv_ext() -> ModuleType:
    """The ``mmcv._ext`` that ``mmcv.ops`` uses: compiled, or the stand-in."""
    return importlib.import_module('mmcv._ext')


def uses_stand_in() -> bool:
    """True when ``mmcv.ops`` runs on inline_dense's stand-in rather than compiled ops."""
    return bool(getattr(mmcv_ext(), 'IS_STAND_IN', False))


__all__ = ['mmcv_ext', 'uses_stand_in']
