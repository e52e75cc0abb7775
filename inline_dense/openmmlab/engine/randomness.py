"""Random numbers that do not depend on where a run was interrupted.

mmengine seeds the random generators once, when the Runner is built, and its checkpoints hold
only the seed; the data sampler and the data workers get theirs when the Runner is built, from
the seed of *that* run. A run resumed at epoch 3 therefore draws other dropout / drop-path
masks (and main-process augmentations) than the uninterrupted run did from epoch 3 on,
and ends with other weights. ``DeterministicResumeHook`` reseeds Python's ``random``,
NumPy and torch (CPU and CUDA) at the start of every epoch and every iteration from
``(seed, epoch or iteration, rank)`` (and, in iteration-based loops, before fetching each
batch), so the numbers drawn at step k are the same whether or not the process was
restarted before step k.

``DeterministicResumeHook`` also writes the generators' states (Python, NumPy, torch, CUDA)
and the seeds of the run and of its sampler into every checkpoint (``inline_rng``), and puts
them back on resume. ``tools/train.py --resume`` reads them before the Runner is built, so the
sampler and the data workers start from the interrupted run's seeds: no fixed seed is needed.
Where a resume cannot be exact, :func:`resume_exactness_problems` says why, before training.

Config: ``custom_hooks = [dict(type='DeterministicResumeHook')]`` (``inline_common.py`` has it).
"""
import hashlib
import logging
import random
import zipfile
from typing import Any

import numpy as np
import torch
from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS
from mmengine.runner import set_random_seed

from .mmengine_compat import check_mmengine_version, runner_private

RNG_KEY = 'inline_rng'  # top-level key of a checkpoint dict


def derived_seed(seed: int, kind: str, step: int, rank: int = 0) -> int:
    """A 32-bit seed from (seed, kind, step, rank); well mixed, stable across processes."""
    digest = hashlib.sha256(f'{seed}:{kind}:{step}:{rank}'.encode()).digest()
    return int.from_bytes(digest[:4], 'little')


class ReseedingIterator:
    """Wraps an iteration-based loop's data iterator: reseeds before fetching batch k.

    A resumed IterBasedTrainLoop fetches (and skips) the batches already trained on, one
    after another, before it fetches the next one; without this, augmentations drawn in the
    main process (``num_workers=0``) would then see other random numbers."""

    def __init__(self, iterator, seed_of_fetch) -> None:
        self.iterator = iterator
        self.seed_of_fetch = seed_of_fetch
        self.fetched = 0

    def __iter__(self) -> 'ReseedingIterator':
        return self

    def __next__(self):
        set_random_seed(self.seed_of_fetch(self.fetched))
        self.fetched += 1
        return next(self.iterator)

    def skip_iter(self, num_iters: int) -> None:
        """Skips the next ``num_iters`` batches by fetching them, each after its reseed, as
        mmengine 0.10.7's resume does; onedl-mmengine's resume calls this. Replaying keeps the
        resume exact: the data workers start from the seeds of fetch 0 as in the uninterrupted
        run (advancing the sampler instead would start them from other seeds)."""
        for _ in range(max(num_iters, 0)):
            next(self)


@HOOKS.register_module()
class DeterministicResumeHook(Hook):
    """Reseeds all generators before every training epoch and iteration.

    With it, a run killed and restarted with ``--resume`` ends with the same weights as an
    uninterrupted one (same seed, same data order, deterministic kernels). Iteration-based
    loops replay the data stream on resume, so this holds with any number of data workers.
    Limit: in epoch-based loops, workers with ``persistent_workers=True`` keep their own
    generators across epochs and are restarted on resume, so their random augmentations
    differ after a restart (use ``persistent_workers=False`` there for exact resumes).
    """

    priority = 'VERY_HIGH'  # before any other hook draws random numbers

    def __init__(self) -> None:
        check_mmengine_version()
        self._resumed: dict[str, Any] | None = None

    def _seed(self, runner, kind: str, step: int) -> int:
        randomness = runner_private(runner, '_randomness_cfg') or {}
        rank = get_rank() if randomness.get('diff_rank_seed', False) else 0
        return derived_seed(int(runner.seed), kind, step, rank)

    def _reseed(self, runner, kind: str, step: int) -> None:
        set_random_seed(self._seed(runner, kind, step))

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        checkpoint[RNG_KEY] = rng_state(runner.seed, sampler_seed(runner))

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        if runner_private(runner, '_resume'):
            self._resumed = checkpoint.get(RNG_KEY)
            if self._resumed is None:
                print_log('DeterministicResumeHook: the checkpoint holds no random-generator states (written '
                          'without this hook); the resumed run will draw other random numbers than the '
                          'interrupted one.', logger='current', level=logging.WARNING)

    def before_train(self, runner) -> None:
        loop = runner.train_loop
        iterator = getattr(loop, 'dataloader_iterator', None)
        if iterator is not None and not isinstance(iterator, ReseedingIterator):
            loop.dataloader_iterator = ReseedingIterator(iterator, lambda k: self._seed(runner, 'fetch', k))
        if self._resumed is not None:
            saved, self._resumed = self._resumed, None
            built_with = sampler_seed(runner)
            if saved.get('sampler_seed') is not None and built_with != saved['sampler_seed']:
                print_log(f'DeterministicResumeHook: this resume is NOT exact: the data sampler was built with seed '
                          f'{built_with}, the interrupted run\'s with {saved["sampler_seed"]}, so the data order '
                          f'and the data workers\' augmentations differ. Resume with tools/train.py --resume, or '
                          f'set randomness.seed={saved["seed"]} and train_dataloader.sampler.seed='
                          f'{saved["sampler_seed"]}.', logger='current', level=logging.WARNING)
            restore_rng_state(saved)

    def before_train_epoch(self, runner) -> None:
        self._reseed(runner, 'epoch', runner.epoch)

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:  # noqa: ARG002
        self._reseed(runner, 'iter', runner.iter)


def sampler_seed(runner) -> int | None:
    """The seed of the training data sampler (mmengine's samplers draw one when built)."""
    sampler = getattr(getattr(runner.train_loop, 'dataloader', None), 'sampler', None)
    seed = getattr(sampler, 'seed', None)
    return int(seed) if isinstance(seed, (int, np.integer)) else None


def rng_state(seed: int, sampler: int | None) -> dict[str, Any]:
    """The generators' states as tensors and plain numbers (``torch.load(weights_only=True)`` reads them)."""
    version, key, gauss = random.getstate()
    np_state = np.random.get_state(legacy=False)
    return {
        'seed': int(seed), 'sampler_seed': sampler,
        'python': {'version': version, 'key': torch.tensor(key, dtype=torch.int64), 'gauss': gauss},
        'numpy': {'key': torch.from_numpy(np_state['state']['key'].astype(np.int64)),
                  'pos': int(np_state['state']['pos']), 'has_gauss': int(np_state['has_gauss']),
                  'gauss': float(np_state['gauss'])},
        'torch': torch.get_rng_state(),
        'cuda': torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
    }


def restore_rng_state(state: dict[str, Any]) -> None:
    """Puts back what :func:`rng_state` recorded."""
    py = state['python']
    random.setstate((py['version'], tuple(int(k) for k in py['key']), py['gauss']))
    nps = state['numpy']
    np.random.set_state({'bit_generator': 'MT19937', 'state': {'key': nps['key'].numpy().astype(np.uint32),
                                                               'pos': nps['pos']},
                         'has_gauss': nps['has_gauss'], 'gauss': nps['gauss']})
    torch.set_rng_state(state['torch'])
    if state['cuda'] and torch.cuda.is_available() and len(state['cuda']) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state['cuda'])


def saved_seeds(checkpoint: str) -> dict[str, int | None] | None:
    """``{'seed', 'sampler_seed'}`` of the run that wrote ``checkpoint`` (mmengine's ``meta.seed`` for
    checkpoints written without this hook), or None when it records neither."""
    obj = torch.load(checkpoint, map_location='cpu', weights_only=True, mmap=zipfile.is_zipfile(checkpoint))
    state = obj.get(RNG_KEY) or {}
    seed = state.get('seed', (obj.get('meta') or {}).get('seed'))
    return None if seed is None else {'seed': int(seed), 'sampler_seed': state.get('sampler_seed')}


def _hook_types(cfg, key: str) -> list[str]:
    hooks = cfg.get(key) or []
    items = hooks.values() if isinstance(hooks, dict) else hooks
    return [h.get('type') if isinstance(h.get('type'), str) else getattr(h.get('type'), '__name__', '')
            for h in items if isinstance(h, dict)]


def resume_exactness_problems(cfg) -> list[str]:
    """Why a killed and resumed run of ``cfg`` would not end as an uninterrupted one; [] if it would."""
    problems = []
    if 'DeterministicResumeHook' not in _hook_types(cfg, 'custom_hooks'):
        problems.append('custom_hooks has no DeterministicResumeHook: the random generators are neither '
                        'saved nor reseeded (add dict(type="DeterministicResumeHook"))')
    loop = (cfg.get('train_cfg') or {}).get('type', '')
    loader = cfg.get('train_dataloader') or {}
    by_epoch = loop in ('EpochBasedTrainLoop', 'mmengine.EpochBasedTrainLoop') or \
        (not loop and (cfg.get('train_cfg') or {}).get('by_epoch', False))
    if by_epoch and loader.get('num_workers', 0) > 0 and loader.get('persistent_workers', False):
        problems.append('the epoch-based loop keeps its data workers (persistent_workers=True): their random '
                        'augmentations after a restart differ (set train_dataloader.persistent_workers=False '
                        'for exact resumes)')
    return problems
