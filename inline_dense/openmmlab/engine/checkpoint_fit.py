"""Refuse a checkpoint that does not fit the model, before mmengine loads it.

mmengine's ``Runner.load_checkpoint`` loads with ``strict=False``: a RetinaNet checkpoint on a
Mask R-CNN config loads a handful of tensors, logs the rest as missing / unexpected keys, and
the test then reports AP 0.000. Weights with NaN or inf are refused too (naming the tensors): a
detector with them predicts nothing. ``CheckpointFitHook`` compares the checkpoint with the model in
``after_load_checkpoint`` (called before the weights are copied) and raises
:class:`CheckpointMismatch` with counts and examples. ``allow_partial=True`` (``tools/test.py`` /
``tools/train.py --allow-partial-load``) logs the same report and lets the partial load happen,
e.g. to fine-tune from a checkpoint with another number of classes.
"""
import logging
import re
from typing import Dict, List, Mapping, Sequence, Tuple

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS

from ...checkpoint.finite import check_finite
from ...checkpoint.loading import CheckpointError, compare

EXAMPLES = 5
NONFINITE_FIX = ('A run whose loss turned NaN saves such weights: use one of its earlier checkpoints '
                 '(WORK_DIR/iter_N.pth) or train again with a lower learning rate or gradient clipping '
                 '(optim_wrapper.clip_grad).')


class CheckpointMismatch(CheckpointError):
    """The checkpoint's weights do not match the model's."""


def _examples(keys: List[str]) -> str:
    """'(backbone 30, roi_head 12): k1, k2, ...': counts per top-level module, then examples taken
    from each module in turn."""
    groups: Dict[str, List[str]] = {}
    for k in keys:
        groups.setdefault(k.split('.')[0].split(':')[0], []).append(k)
    picks: List[str] = []
    for rank in range(max(len(g) for g in groups.values())):
        picks += [g[rank] for g in groups.values() if rank < len(g)]
    more = f', ... ({len(keys) - EXAMPLES} more)' if len(keys) > EXAMPLES else ''
    counts = ', '.join(f'{name} {len(g)}' for name, g in groups.items())
    return f'({counts}): {", ".join(picks[:EXAMPLES])}{more}'


def fit_report(model_state: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor]) -> List[str]:
    """Lines describing what does not match, [] when everything does."""
    missing, unexpected, mismatched = compare(model_state, state)
    return [f'  {len(keys)} {title} {_examples(keys)}'
            for title, keys in ((f'of the model\'s {len(model_state)} weights missing from the checkpoint', missing),
                                ('in the checkpoint that the model does not have', unexpected),
                                ('with another shape', mismatched)) if keys]


def revised(state: Mapping[str, torch.Tensor], revise_keys: Sequence[Tuple[str, str]]) -> dict:
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
    """

    priority = 'VERY_HIGH'

    def __init__(self, allow_partial: bool = False, source: str = 'the checkpoint', resume: bool = False) -> None:
        self.allow_partial = allow_partial and not resume
        self.source = source
        self.resume = resume

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        state = checkpoint.get('state_dict', checkpoint)
        if not isinstance(state, Mapping):
            raise CheckpointMismatch(f'the checkpoint holds no state dict (top-level keys: {sorted(checkpoint)[:10]})')
        check_finite(state, self.source, NONFINITE_FIX)
        lines = fit_report(model.state_dict(), revised(state, [(r'^module\.', '')]))
        if not lines:
            return
        head = f'{self.source} does not fit {type(model).__name__}'
        if self.allow_partial:
            print_log('\n'.join([f'{head}; loading only the matching weights (--allow-partial-load):', *lines]),
                      logger='current', level=logging.WARNING)
            return
        fix = ('  Resume from a checkpoint of this config, or start from this one\'s weights without resuming: '
               'load_from with --allow-partial-load to load only the matching ones.' if self.resume else
               '  Pass the checkpoint of this config, or --allow-partial-load to load only the matching weights on '
               'purpose (e.g. to fine-tune with another number of classes).')
        raise CheckpointMismatch('\n'.join([
            f'{head} (another model\'s or another dataset\'s checkpoint?):', *lines, fix]))
