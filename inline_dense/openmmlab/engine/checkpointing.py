"""Checkpoints that survive a kill: atomic writes and a resume that skips broken files.

mmengine's ``CheckpointHook`` writes ``epoch_N.pth`` in place, then the ``last_checkpoint``
pointer in place, and with ``max_keep_ckpts`` it deletes the oldest kept checkpoint
*before* writing the new one. A process killed during the write leaves a truncated
``epoch_N.pth``; killed while writing the pointer it leaves an empty ``last_checkpoint``;
with ``max_keep_ckpts=1`` it can leave the pointer naming a deleted file. ``--resume``
then fails or, worse, reads a broken file.

``AtomicCheckpointHook`` writes each checkpoint to a temporary file in the same directory,
flushes it to disk and renames it into place (``os.replace`` is atomic on POSIX), then
replaces the pointer the same way, and only then deletes old checkpoints. Before a resume
it checks the checkpoint the pointer names and falls back to the newest complete one.

Config: ``default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook', interval=1))``.
"""
import difflib
import glob
import inspect
import logging
import os
import os.path as osp
import re
from pathlib import Path
from typing import Any

from mmengine.dist import is_main_process
from mmengine.fileio.backends import LocalBackend
from mmengine.hooks import CheckpointHook
from mmengine.logging import print_log
from mmengine.registry import HOOKS
from mmengine.runner import Runner

from ...checkpoint.archive import archive_problem
from ...checkpoint.atomic import TMP_PREFIX, atomic_write_text, commit
from .mmengine_compat import check_mmengine_version, runner_private


def is_complete_checkpoint(path: str | None) -> bool:
    """Cheap check that ``path`` is a whole ``torch.save`` file (zip format, readable directory).

    A truncated write loses the zip central directory at the end of the file, so opening
    it fails; the tensors are not read.
    """
    return bool(path) and osp.isfile(path) and archive_problem(Path(path), thorough=False) is None


def newest_complete_checkpoint(directory: str, filename_tmpl: str = 'epoch_{}.pth') -> str | None:
    """The complete checkpoint with the highest step named like ``filename_tmpl`` in ``directory``."""
    pattern = re.compile('^' + re.escape(filename_tmpl).replace(r'\{\}', r'(\d+)') + '$')
    found = []
    for path in glob.glob(osp.join(directory, '*')):
        m = pattern.match(osp.basename(path))
        if m:
            found.append((int(m.group(1)), path))
    for _, path in sorted(found, reverse=True):
        if is_complete_checkpoint(path):
            return path
    return None


def own_checkpoint(work_dir: str) -> str | None:
    """The checkpoint ``work_dir/last_checkpoint`` names (None without a pointer).

    mmengine writes an absolute path. When that path is in another directory and ``work_dir``
    holds a file of the same name, the work directory was moved or copied: its own file is
    returned, not the original directory's.
    """
    pointer = osp.join(work_dir, 'last_checkpoint')
    if not osp.isfile(pointer):
        return None
    with open(pointer) as f:
        target = f.read().strip()
    local = osp.join(work_dir, osp.basename(target)) if target else ''
    if local and osp.realpath(osp.dirname(target)) != osp.realpath(work_dir) and osp.isfile(local):
        print_log(f'{pointer} names {target}, outside this work directory (it was moved or copied); using '
                  f'its own {local}', logger='current', level=logging.WARNING)
        return local
    return target


class HookOptionError(TypeError):
    """A checkpoint hook option that does not exist (a typo such as ``intervall``)."""


def unknown_options_message(hook_name: str, unknown: list[str]) -> str:
    known = sorted(_HOOK_OPTIONS)
    hints = [f'{name!r}' + (f' (did you mean {close[0]!r}?)' if close else '')
             for name in unknown for close in [difflib.get_close_matches(name, known, 1)]]
    return (f'default_hooks.checkpoint ({hook_name}): unknown option(s) {", ".join(hints)}. '
            f'It takes {", ".join(known)}.')


# CheckpointHook passes options it does not know to Runner.save_checkpoint, which takes none besides
# those the hook passes itself: every unknown option is a mistake.
_HOOK_OPTIONS = frozenset(p for p in inspect.signature(CheckpointHook.__init__).parameters
                          if p not in ('self', 'kwargs'))
_SAVE_OPTIONS = frozenset(inspect.signature(Runner.save_checkpoint).parameters) - {
    'self', 'out_dir', 'filename', 'file_client_args', 'save_optimizer', 'save_param_scheduler', 'meta', 'by_epoch',
    'backend_args'}


@HOOKS.register_module()
class AtomicCheckpointHook(CheckpointHook):
    """``CheckpointHook`` whose periodic checkpoints and ``last_checkpoint`` are written atomically.

    Same arguments as mmengine's ``CheckpointHook``. On a local ``out_dir`` each checkpoint
    goes to a temporary file that is renamed into place once complete; ``last_checkpoint``
    is replaced the same way; old checkpoints (``max_keep_ckpts``) are deleted afterwards.
    Other storage backends fall back to the parent's behaviour.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        check_mmengine_version()
        unknown = sorted(set(kwargs) - _HOOK_OPTIONS - _SAVE_OPTIONS)
        if unknown:  # mmengine passes them on to Runner.save_checkpoint, which fails at the first save
            raise HookOptionError(unknown_options_message(type(self).__name__, unknown))
        super().__init__(*args, **kwargs)

    def before_run(self, runner) -> None:
        super().before_run(runner)
        if runner_private(runner, '_resume') and runner_private(runner, '_load_from') is None:
            self._check_resume_target(runner)

    def _check_resume_target(self, runner) -> None:
        pointer = osp.join(runner.work_dir, 'last_checkpoint')
        target = own_checkpoint(runner.work_dir)
        if target is None:
            return
        if is_complete_checkpoint(target):
            fallback = target
        else:
            directory = osp.dirname(target) if target else runner.work_dir
            fallback = newest_complete_checkpoint(directory, self.filename_tmpl)
            if fallback is None:
                raise RuntimeError(
                    f'--resume: {pointer} names {target!r}, which is missing or truncated, and no complete '
                    f'checkpoint matching {self.filename_tmpl!r} is in {directory!r}. Pass --resume PATH with a '
                    f'good checkpoint, or delete {pointer} to train from scratch.')
            print_log(f'AtomicCheckpointHook: {pointer} names {target!r}, which is missing or truncated; '
                      f'resuming from {fallback} instead.', logger='current', level=logging.WARNING)
        runner._load_from = fallback  # mmengine resumes from load_from when resume=True

    def _save_checkpoint_with_step(self, runner, step, meta) -> None:
        if not isinstance(self.file_backend, LocalBackend):
            return super()._save_checkpoint_with_step(runner, step, meta)
        ckpt_filename = self.filename_tmpl.format(step)
        self.last_ckpt = osp.join(self.out_dir, ckpt_filename)
        runner.message_hub.update_info('last_ckpt', self.last_ckpt)
        # the kept list goes into the checkpoint (a resumed run deletes what it lists) ...
        dropped = self._update_kept(runner, step)
        tmp_name = f'{TMP_PREFIX}{ckpt_filename}'
        tmp_path = osp.join(self.out_dir, tmp_name)
        try:
            runner.save_checkpoint(self.out_dir, tmp_name, self.file_client_args,
                                   save_optimizer=self.save_optimizer,
                                   save_param_scheduler=self.save_param_scheduler, meta=meta,
                                   by_epoch=self.by_epoch, backend_args=self.backend_args, **self.args)
        except BaseException:
            if is_main_process() and osp.exists(tmp_path):
                os.remove(tmp_path)
            raise
        if not is_main_process():
            return
        commit(tmp_path, self.last_ckpt)
        atomic_write_text(osp.join(runner.work_dir, 'last_checkpoint'), self.last_ckpt)
        # ... but the files beyond max_keep_ckpts are deleted only now that the new one is safe
        for old_step in dropped:
            old = osp.join(self.out_dir, self.filename_tmpl.format(old_step))
            if osp.isfile(old):
                os.remove(old)

    def _update_kept(self, runner, step: int) -> list[int]:
        """Adds ``step`` to the kept checkpoints; returns the steps beyond ``max_keep_ckpts``."""
        if self.max_keep_ckpts <= 0:
            return []
        kept = [s for s in self.keep_ckpt_ids if s != step] + [step]
        dropped = kept[:-self.max_keep_ckpts]
        kept = kept[-self.max_keep_ckpts:]
        self.keep_ckpt_ids.clear()
        self.keep_ckpt_ids.extend(kept)
        runner.message_hub.update_info('keep_ckpt_ids', kept)
        return dropped
