"""Warnings that the OpenMMLab packages raise on import, and known log lines, silenced one by one.

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
and so by every tool; it is idempotent. Log lines: mmengine's FileClient notices in a run's log
(:func:`quiet_run_logger`), onnxscript's unfolded-Split notices during an ONNX export (:func:`quiet_export`).
"""
import contextlib
import logging
import warnings
from collections.abc import Iterator

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
    """Drops the WARNING records that start with one of ``notices`` (default :data:`KNOWN_LOG_NOTICES`);
    every other record passes."""

    def __init__(self, notices: tuple[str, ...] = KNOWN_LOG_NOTICES) -> None:
        super().__init__()
        self.notices = notices

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.WARNING and record.getMessage().startswith(self.notices))


def quiet_run_logger(logger: logging.Logger) -> None:
    """Adds :class:`KnownLogNotices` to ``logger`` (a Runner's ``MMLogger``) once."""
    if not any(isinstance(f, KnownLogNotices) for f in logger.filters):
        logger.addFilter(KnownLogNotices())


# torch.onnx.export runs onnxscript's optimiser, whose constant folding logs a WARNING for every Split it
# leaves unfolded (20 lines for InLine-Swin-T): the exported graph is correct and complete, and a user can do
# nothing about it. Matched at the start, on that logger only, during our exports only.
EXPORT_LOGGER = 'onnxscript.optimizer._constant_folding'
KNOWN_EXPORT_NOTICES = ('Skipping constant folding for op Split with multiple outputs.',)


@contextlib.contextmanager
def quiet_export() -> Iterator[None]:
    """Drops :data:`KNOWN_EXPORT_NOTICES` from :data:`EXPORT_LOGGER` while active."""
    logger = logging.getLogger(EXPORT_LOGGER)
    notices = KnownLogNotices(KNOWN_EXPORT_NOTICES)
    logger.addFilter(notices)
    try:
        yield
    finally:
        logger.removeFilter(notices)
