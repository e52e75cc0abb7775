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
import logging
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


# mmengine's own CheckpointHook and LoggerHook build a FileClient in every run (kept until mmengine
# 1.0, their comments say), and FileClient announces its deprecation through the run's logger: two
# WARNING lines in every training log that say nothing about the run. Matched at the start.
KNOWN_LOG_NOTICES = (
    '"FileClient" will be deprecated in future.',
    '"HardDiskBackend" is the alias of "LocalBackend" and the former will be deprecated in future.',
)


class KnownLogNotices(logging.Filter):
    """Drops the WARNING records of :data:`KNOWN_LOG_NOTICES`; every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.WARNING and record.getMessage().startswith(KNOWN_LOG_NOTICES))


def quiet_run_logger(logger: logging.Logger) -> None:
    """Adds :class:`KnownLogNotices` to ``logger`` (a Runner's ``MMLogger``) once."""
    if not any(isinstance(f, KnownLogNotices) for f in logger.filters):
        logger.addFilter(KnownLogNotices())
