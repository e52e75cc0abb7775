"""InLine attention backbones for dense prediction.

``import inline_dense`` is light: it imports nothing (no torch, no OpenMMLab). Use

* :mod:`inline_dense.models`: the backbones in plain torch (``InLineSwin``, ``InLinePVT``,
  ``InLineCSwin``), initialised at construction; :func:`inline_dense.checkpoint.load_pretrained`
  loads the authors' ImageNet weights into them;
* :mod:`inline_dense.openmmlab`: the same backbones for MMDetection / MMSegmentation (registered
  in mmengine's ``MODELS`` with ``init_cfg``), the engine hooks, the mmcv ops and the
  ``inline://`` checkpoint scheme; the configs import it through ``custom_imports``.
"""
__all__ = ['InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin', '__version__']

_CORE_NAMES = ('InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin')


def __getattr__(name: str) -> object:  # PEP 562: ``inline_dense.InLineSwin`` imports the core on first use
    if name == '__version__':  # the installed distribution's (pyproject.toml's), read on first use
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version(__name__)
        except PackageNotFoundError:  # a checkout on sys.path, never installed
            return '0+unknown'
    if name in _CORE_NAMES:
        from . import models
        return getattr(models, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
