"""mmcv's compiled ops, served by torchvision and plain torch when only mmcv-lite is installed.

``ext.py`` is the stand-in for ``mmcv._ext``; ``inline_dense_mmcv_hook`` (a top-level module,
imported at interpreter start through a .pth file and by ``import inline_dense``) loads it under
that name when mmcv has no compiled extension. ``python -m inline_dense_mmcv_hook`` says which
one this environment uses.
"""
import importlib
from types import ModuleType


def mmcv_ext() -> ModuleType:
    """The ``mmcv._ext`` that ``mmcv.ops`` uses: compiled, or the stand-in."""
    return importlib.import_module('mmcv._ext')


def uses_stand_in() -> bool:
    """True when ``mmcv.ops`` runs on inline_dense's stand-in rather than compiled ops."""
    return bool(getattr(mmcv_ext(), 'IS_STAND_IN', False))


__all__ = ['mmcv_ext', 'uses_stand_in']
