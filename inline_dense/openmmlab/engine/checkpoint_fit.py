"""Refuse a checkpoint that does not fit the model, before mmengine loads it.

mmengine's ``Runner.load_checkpoint`` loads with ``strict=False``: a RetinaNet checkpoint on a
Mask R-CNN config loads a handful of tensors, logs the rest as missing / unexpected keys, and
the test then reports AP 0.000. Weights with NaN or inf, or stored as integers, are refused too (naming
the tensors): a detector with them predicts nothing. The checks and the report are the strict loader's
(``checkpoint.loading``). ``CheckpointFitHook`` compares the checkpoint with the model in
``after_load_checkpoint`` (called before the weights are copied) and raises
:class:`CheckpointMismatch` with counts and examples. ``allow_partial=True`` (``tools/test.py`` /
``tools/train.py --allow-partial-load``) logs the same report and lets the partial load happen,
e.g. to fine-tune from a checkpoint with another number of classes.
"""
import logging
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS

from ...checkpoint.archive import archive_problem
from ...checkpoint.errors import CheckpointError
from ...checkpoint.loading import check_weights, fit_report

NONFINITE_FIX = ('A run whose loss turned NaN saves such weights: use one of its earlier checkpoints '
                 '(WORK_DIR/iter_N.pth) or train again with a lower learning rate or gradient clipping '
                 '(optim_wrapper.clip_grad).')
INTEGER_FIX = ('Use the checkpoint as the training run saved it (WORK_DIR/iter_N.pth): a file converted or edited '
               'since has cast its weights.')


class CheckpointMismatch(CheckpointError):
    """The checkpoint's weights do not match the model's."""


def check_readable(path: str) -> None:
    """Raises :class:`CheckpointError` (one line) when the file at ``path`` is empty, cut off or not a
    checkpoint: a tool checks it before building the Runner, whose reader would end in torch's traceback.
    Only the archive's directory is read (a legacy pickle file: all of it, without running code)."""
    problem = archive_problem(Path(path), thorough=False) if os.path.getsize(path) else 'it is empty'
    if problem is not None:
        raise CheckpointError(f'checkpoint {path} cannot be read: {problem}. An interrupted download or write '
                              f'cuts a file short: download or save it again, or pass another checkpoint.')


def revised(state: Mapping[str, torch.Tensor], revise_keys: Sequence[tuple[str, str]]) -> dict:
    """The keys as mmengine's ``load_checkpoint`` revises them (default: ``^module.`` removed)."""
    out = dict(state)
    for pattern, repl in revise_keys:
        out = {re.sub(pattern, repl, k): v for k, v in out.items()}
    return out


@HOOKS.register_module()
class CheckpointFitHook(Hook):
    """Raises :class:`CheckpointMismatch` when a loaded checkpoint does not fit the model.

    Args:
        allow_partial: log the mismatch and load what matches instead of raising.
        source: the checkpoint's name, for the message.
        resume: the checkpoint is resumed from (a partial load is never what a resume means).
        fix: the refusal's last line, what to do (default: the test and train tools' advice).
    """

    priority = 'VERY_HIGH'

    def __init__(self, allow_partial: bool = False, source: str = 'the checkpoint', resume: bool = False,
                 fix: str | None = None) -> None:
        self.allow_partial = allow_partial and not resume
        self.source = source
        self.resume = resume
        self.fix = fix

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        state = checkpoint.get('state_dict', checkpoint)
        if not isinstance(state, Mapping):
            raise CheckpointMismatch(f'the checkpoint holds no state dict (top-level keys: {sorted(checkpoint)[:10]})')
        model_state, state = model.state_dict(), revised(state, [(r'^module\.', '')])
        check_weights(state, self.source, NONFINITE_FIX, model_state, INTEGER_FIX)  # NaN / inf, integer weights
        lines = fit_report(model_state, state)
        if not lines:
            return
        head = f'{self.source} does not fit {type(model).__name__}'
        if self.allow_partial:
            print_log('\n'.join([f'{head}; loading only the matching weights (--allow-partial-load):', *lines]),
                      logger='current', level=logging.WARNING)
            return
        fix = f'  {self.fix}' if self.fix else (
               '  Resume from a checkpoint of this config, or start from this one\'s weights without resuming: '
               'load_from with --allow-partial-load to load only the matching ones.' if self.resume else
               '  Pass the checkpoint of this config, or --allow-partial-load to load only the matching weights on '
               'purpose (e.g. to fine-tune with another number of classes).')
        raise CheckpointMismatch('\n'.join([
            f'{head} (another model\'s or another dataset\'s checkpoint?):', *lines, fix]))
