"""The private parts of mmengine that ``inline_dense.openmmlab.engine`` relies on, checked loudly.

mmengine has no public way to replace how ``CheckpointHook`` writes a file, to read the
randomness settings a Runner was built with, or to change what it resumes from. The hooks here
use ``CheckpointHook._save_checkpoint_with_step``, ``Runner._randomness_cfg``,
``Runner._load_from`` and ``Runner._resume``, which exist, with the meaning used here, in
mmengine 0.10 (0.10.7 is pinned in requirements/lock.txt, onedl-mmengine 0.10.12 in
lock-onedl.txt). On another version the hooks refuse to start rather than misbehave silently.
"""
from typing import Any

import mmengine
from mmengine.hooks import CheckpointHook

KNOWN_SERIES = ('0.10.',)
PINNED = '0.10.7'
HOOK_PRIVATES = ('_save_checkpoint_with_step',)
RUNNER_PRIVATES = ('_randomness_cfg', '_load_from', '_resume')


class UnsupportedMmengine(RuntimeError):
    """The installed mmengine is not one whose private attributes ``inline_dense.openmmlab.engine`` knows."""


def _fail(what: str) -> UnsupportedMmengine:
    return UnsupportedMmengine(
        f'inline_dense.openmmlab.engine relies on private parts of mmengine 0.10 '
        f'({", ".join(HOOK_PRIVATES + RUNNER_PRIVATES)}); '
        f'{what}. Install mmengine=={PINNED} or onedl-mmengine==0.10.12 (bash tools/setup_env.sh), or remove '
        f'AtomicCheckpointHook / DeterministicResumeHook from the config (default_hooks.checkpoint, custom_hooks) '
        f'to train without atomic checkpoints and exact resumes.')


def check_mmengine_version(version: str = '') -> None:
    """Raises :class:`UnsupportedMmengine` unless ``version`` (default: the installed one) is a
    known series and ``CheckpointHook`` still has the method overridden here."""
    version = version or mmengine.__version__
    if not version.startswith(KNOWN_SERIES):
        raise _fail(f'mmengine {version} is installed, whose internals are not known here')
    missing = [name for name in HOOK_PRIVATES if not callable(getattr(CheckpointHook, name, None))]
    if missing:
        raise _fail(f'this mmengine {version} has no CheckpointHook.{missing[0]}')


def runner_private(runner: Any, name: str) -> Any:
    """``runner.<name>`` for one of :data:`RUNNER_PRIVATES`; raises if this Runner lacks it."""
    if name not in RUNNER_PRIVATES:
        raise ValueError(f'{name} is not one of the checked private Runner attributes {RUNNER_PRIVATES}')
    if not hasattr(runner, name):
        raise _fail(f'this {type(runner).__name__} (mmengine {mmengine.__version__}) has no attribute {name}')
    return getattr(runner, name)


def resolve_mmseg_configs() -> bool:
    """Lets ``mmseg::`` config names resolve whichever distribution provides ``mmseg``.

    mmengine finds a ``mmseg::`` base through the distribution named in its
    ``mmengine.config.utils.MODULE2PACKAGE`` ('mmsegmentation'), falling back to an import of that
    name; with onedl-mmsegmentation installed neither exists, and ``Config.fromfile`` fails with
    "mmsegmentation is not installed". Where that is so and ``mmseg`` imports, the table names the
    import name instead, as it does for ``mmdet``. Changes nothing elsewhere; returns whether it did."""
    import importlib.util

    from mmengine.config import utils as config_utils
    from mmengine.utils import is_installed
    table = getattr(config_utils, 'MODULE2PACKAGE', None)
    if not isinstance(table, dict) or table.get('mmseg') in (None, 'mmseg'):
        return False
    if is_installed(table['mmseg']) or importlib.util.find_spec('mmseg') is None:
        return False
    table['mmseg'] = 'mmseg'
    return True
