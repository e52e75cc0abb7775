"""What a resume is given, checked before the Runner starts: a training checkpoint, and a config
that does not contradict it.

mmengine's ``Runner.resume`` reads ``checkpoint['meta']`` (a weights-only file fails with
``KeyError: 'meta'``), loads the weights without a fit check (another model's checkpoint loads a
part, then fails inside the optimizer), and restores the optimizer's state (learning rate,
betas, weight decay of every parameter group) and the schedulers' state over what the new config
says, while the config dumped into the work directory and every new checkpoint's ``meta.cfg``
record the new values. :func:`training_checkpoint` refuses what cannot be resumed;
:func:`config_changes` says which settings differ from the checkpoint's recorded config, split
into those the checkpoint would override (refused by ``tools/train.py``) and those the new
config sets for the rest of the run (warned about).
"""
import os.path as osp
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from ...checkpoint.archive import archive_problem
from ...checkpoint.errors import CheckpointError
from ...checkpoint.reading import read_checkpoint


class ResumeError(CheckpointError):
    """A checkpoint that cannot be resumed from, or a config that contradicts it. ``kind``:
    'incomplete' (empty or cut off), 'weights_only' (no training state) or '' (anything else)."""

    def __init__(self, message: str, kind: str = '') -> None:
        super().__init__(message)
        self.kind = kind


class MissingResumeCheckpoint(ResumeError, FileNotFoundError):
    """The checkpoint named to resume from does not exist."""


# Settings a resume restores from the checkpoint's optimizer / scheduler state: a changed value in
# the config would be recorded but not used (the constructor makes the parameter groups, whose count
# and lrs the saved state fixes: mmengine warns, then fails with "different number of parameter
# groups"). (The wrapper's type, dtype, loss scale and gradient clipping are not in that state: they
# take the new config's values.)
OVERRIDDEN_BY_CHECKPOINT = ('optim_wrapper.optimizer', 'optim_wrapper.paramwise_cfg', 'optim_wrapper.constructor',
                            'optimizer', 'param_scheduler', 'auto_scale_lr')
# Settings the new config sets for the rest of the run (the weights still come from the checkpoint;
# the fit check refuses weights that no longer fit).
TAKEN_FROM_CONFIG = ('optim_wrapper', 'train_cfg', 'train_dataloader.batch_size', 'model')
# Parts of those that do not matter once weights are resumed.
IGNORED = ('init_cfg', 'pretrained')


def training_checkpoint(path: str) -> Mapping:
    """The checkpoint at ``path`` when it is one a training run wrote (weights, ``meta`` with the
    iteration); raises :class:`ResumeError` (truncated, empty, a weights-only file) or
    ``CheckpointError`` (unreadable) naming the problem and what to pass instead."""
    problem = archive_problem(Path(path), thorough=False) if osp.getsize(path) else 'it is empty'
    if problem is not None:
        raise ResumeError(f'cannot resume from {path}: {problem}, as a write cut short by a killed run leaves it. '
                          f'Resume from another checkpoint of the run (WORK_DIR/iter_N.pth or epoch_N.pth), or '
                          f'let the run pick the newest complete one of its work directory (resume=True without '
                          f'load_from).', kind='incomplete')
    try:
        checkpoint = torch.load(path, map_location='cpu', weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception:  # objects outside torch's allow-list: the restricted reader tells
        checkpoint = read_checkpoint(path)
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) else None
    if not isinstance(meta, Mapping) or 'iter' not in meta or not isinstance(checkpoint.get('state_dict'), Mapping):
        keys = sorted(map(str, checkpoint))[:8] if isinstance(checkpoint, Mapping) else type(checkpoint).__name__
        raise ResumeError(f'cannot resume from {path}: it holds weights but no training state (no meta with the '
                          f'iteration, no state_dict; it has {keys}), e.g. an ImageNet or converted backbone file. '
                          f'A resume needs a checkpoint written by training this config. To start training from '
                          f'these weights, load them instead of resuming (load_from, or the backbone\'s '
                          f'init_cfg=dict(type="Pretrained", checkpoint=...)).', kind='weights_only')
    return checkpoint


def recorded_config(checkpoint: Mapping) -> Any | None:
    """The config recorded in ``checkpoint['meta']['cfg']`` (mmengine writes it), or None."""
    text = (checkpoint.get('meta') or {}).get('cfg')
    if not isinstance(text, str) or not text.strip():
        return None
    from mmengine.config import Config
    try:
        return Config.fromstring(text, file_format='.py')
    except Exception:  # a record that does not parse is no record
        return None


def _plain(value: Any) -> Any:
    """Dicts as plain dicts, tuples as lists: the recorded text and the live config spell them differently."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _leaves(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from _leaves(v, f'{key}.{k}')
    else:
        yield key, value


def _lookup(cfg: Any, key: str) -> Any:
    node = cfg
    for part in key.split('.'):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _differences(old: Any, new: Any, key: str) -> list[str]:
    """'key: old -> new' for every leaf that differs (a list compares as one value)."""
    old_leaves, new_leaves = dict(_leaves(_plain(old), key)), dict(_leaves(_plain(new), key))
    lines = []
    for leaf in sorted(set(old_leaves) | set(new_leaves)):
        if any(part in IGNORED for part in leaf.split('.')):
            continue
        before, after = old_leaves.get(leaf, '(unset)'), new_leaves.get(leaf, '(unset)')
        if before != after:
            lines.append(f'{leaf}: {before!r} -> {after!r}')
    return lines


def config_changes(saved: Any, cfg: Any) -> dict[str, list[str]]:
    """``{'overridden': [...], 'applied': [...]}``: 'key: old -> new' for the settings of ``cfg``
    that differ from the checkpoint's recorded config ``saved``. 'overridden': restored from the
    checkpoint's state by a resume (the config's value would not be used); 'applied': used from
    ``cfg`` for the rest of the run."""
    saved, cfg = (c.to_dict() if callable(getattr(c, 'to_dict', None)) else c for c in (saved, cfg))
    overridden: list[str] = []
    for key in OVERRIDDEN_BY_CHECKPOINT:
        overridden += _differences(_lookup(saved, key), _lookup(cfg, key), key)
    applied: list[str] = []
    for key in TAKEN_FROM_CONFIG:
        applied += [line for line in _differences(_lookup(saved, key), _lookup(cfg, key), key)
                    if not line.startswith(tuple(f'{k}{end}' for k in OVERRIDDEN_BY_CHECKPOINT for end in '.:'))]
    return {'overridden': overridden, 'applied': applied}
