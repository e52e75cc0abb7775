"""Warnings that the OpenMMLab packages raise on import, silenced one by one.

Each is named by its category, the start of its message and the module it is attributed to;
nothing else is filtered. They say nothing about this install and read, on a first run, as
something broken:

- setuptools' ``pkg_resources is deprecated as an API`` (UserWarning): mmengine imports
  ``pkg_resources`` to find packages (``mmengine.utils.package_utils``, and ``importlib.reload``
  of it, attributed to ``importlib``) when a config names ``mmdet::`` / ``mmseg::`` bases or a
  Runner collects the environment;
- mmcv's ``MultiScaleDeformableAttention has been moved`` (ImportWarning, shown under
  ``-W default``): ``mmcv.cnn.bricks.transformer`` says it on import, to every importer.

:func:`install` is called by ``import inline_dense.openmmlab`` (which imports mmengine, mmdet and mmseg)
and so by every tool; it is idempotent.
"""
import warnings

KNOWN_IMPORT_WARNINGS = (
    # (category, message regex (matched at the start), module regex (matched at the start, full name))
    (UserWarning, r'pkg_resources is deprecated as an API', r'(mmengine\.utils\.package_utils|importlib)$'),
    (ImportWarning, r'``MultiScaleDeformableAttention`` has been moved', r'mmcv\.cnn\.bricks\.transformer$'),
)


def install() -> None:
    """Ignores exactly the warnings of :data:`KNOWN_IMPORT_WARNINGS`."""
    for category, message, module in KNOWN_IMPORT_WARNINGS:
        warnings.filterwarnings('ignore', message=message, category=category, module=module)
