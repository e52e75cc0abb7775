"""InLine attention backbones for dense prediction.

``import inline_dense`` is light: it imports no torch and no OpenMMLab (the family registry only,
plain data). Use

* :mod:`inline_dense.models`: the backbones in plain torch (``InLineSwin`` and the others: one per
  family of :mod:`inline_dense.registry`), initialised at construction;
  :func:`inline_dense.checkpoint.load_pretrained` loads the authors' ImageNet weights into them;
* :mod:`inline_dense.openmmlab`: the same backbones for MMDetection / MMSegmentation (registered
  in mmengine's ``MODELS`` with ``init_cfg``), the engine hooks, the mmcv ops and the
  ``inline://`` checkpoint scheme; the configs import it through ``custom_imports``.
"""
from . import registry as _registry

__all__ = ['InLineAttention', '__version__']
_registry.follow(lambda spec: __all__.insert(-1, spec.class_name))  # every family's class, run-time ones too


def __getattr__(name: str) -> object:  # PEP 562: ``inline_dense.InLineSwin`` imports the core on first use
    if name == '__version__':  # the installed distribution's (pyproject.toml's), read on first use
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version(__name__)
        except PackageNotFoundError:  # a checkout on sys.path, never installed
            return '0+unknown'
    if name == 'InLineAttention' or _registry.family_of_class(name) is not None:
        from . import models
        return getattr(models, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
