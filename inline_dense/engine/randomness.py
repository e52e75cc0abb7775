"""Random numbers that do not depend on where a run was interrupted.

mmengine seeds the random generators once, when the Runner is built, and checkpoints do
not hold their state. A run resumed at epoch 3 therefore draws other dropout / drop-path
masks (and main-process augmentations) than the uninterrupted run did from epoch 3 on,
and ends with other weights. ``DeterministicResumeHook`` reseeds Python's ``random``,
NumPy and torch (CPU and CUDA) at the start of every epoch and every iteration from
``(seed, epoch or iteration, rank)`` (and, in iteration-based loops, before fetching each
batch), so the numbers drawn at step k are the same whether or not the process was
restarted before step k.

Config: ``custom_hooks = [dict(type='DeterministicResumeHook')]`` with ``randomness=dict(seed=S)``.
"""
import hashlib

from mmengine.dist import get_rank
from mmengine.hooks import Hook
from mmengine.registry import HOOKS
from mmengine.runner import set_random_seed


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

    def _seed(self, runner, kind: str, step: int) -> int:
        randomness = getattr(runner, '_randomness_cfg', None) or {}
        rank = get_rank() if randomness.get('diff_rank_seed', False) else 0
        return derived_seed(int(runner.seed), kind, step, rank)

    def _reseed(self, runner, kind: str, step: int) -> None:
        set_random_seed(self._seed(runner, kind, step))

    def before_train(self, runner) -> None:
        loop = runner.train_loop
        iterator = getattr(loop, 'dataloader_iterator', None)
        if iterator is not None and not isinstance(iterator, ReseedingIterator):
            loop.dataloader_iterator = ReseedingIterator(iterator, lambda k: self._seed(runner, 'fetch', k))

    def before_train_epoch(self, runner) -> None:
        self._reseed(runner, 'epoch', runner.epoch)

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        self._reseed(runner, 'iter', runner.iter)
