"""The core's ``logging`` messages into mmengine's current logger, as they went before the split.

The torch-only core logs to the standard logger ``inline_dense`` (and its children). Under an
mmengine runner, its lines (a checkpoint loaded, downloaded, ignored) belong in the run's log:
console and ``<work_dir>/<timestamp>.log``. The bridge hands each record to ``print_log(...,
logger='current')`` and stops it there (no propagation), so that it is printed once.
"""
import logging

from mmengine.logging import print_log

CORE_LOGGER = 'inline_dense'


class CurrentMMLoggerHandler(logging.Handler):
    """Forwards a record to mmengine's current ``MMLogger`` at the record's level."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print_log(record.getMessage(), logger='current', level=record.levelno)
        except Exception:  # a logging handler must not raise into the code that logged
            self.handleError(record)


def bridge_core_logging() -> None:
    """Idempotent: the ``inline_dense`` logger gets one forwarding handler, level INFO."""
    logger = logging.getLogger(CORE_LOGGER)
    if not any(isinstance(h, CurrentMMLoggerHandler) for h in logger.handlers):
        logger.addHandler(CurrentMMLoggerHandler())
    logger.setLevel(logging.INFO)
    logger.propagate = False
