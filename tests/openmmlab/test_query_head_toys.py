"""The query-based heads' toy configs (configs/toy/dino-*, mask2former_*) learn on CPU.

The full runs take 400-800 iterations of DINO / Mask2Former instance (too long for the suite, see
docs/toy_runs.md for their figures); the suite runs in full the cheapest, the Mask2Former semantic
toy (300 iterations on the toy ADE20K data), and checks its mIoU against chance + 0.3. The two
detectors train 40-60 iterations on the tiny toy data, and their loss must fall by 15% at least.
(Under ``tools/dist_train.sh`` they are in test_toy_dist_training.py.)
"""
import math
import re
from pathlib import Path

import numpy as np
import pytest

from helpers import import_tool

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / 'configs' / 'toy'
pytestmark = pytest.mark.usefixtures('one_thread')  # tiny tensors on shared cores

TRAIN_LOADER, TEST_LOADER = ([f'{loader}.num_workers=0', f'{loader}.persistent_workers=False']
                             for loader in ('train_dataloader', 'test_dataloader'))


def chance_miou(label_maps: list[np.ndarray], ignore: int = 255) -> float:
    """The better of two guessers that never look at the image, as a fraction: a uniformly random
    class for each pixel (expected IoU of class c: n_c / (N + (K - 1) n_c), N labelled pixels,
    K classes), and the most frequent class everywhere (its IoU: its share; the others: 0)."""
    labels = np.concatenate([m[m != ignore].ravel() for m in label_maps])
    counts = np.bincount(labels).astype(np.float64)
    counts = counts[counts > 0]
    total, k = counts.sum(), len(counts)
    uniform = float(np.mean(counts / (total + (k - 1) * counts)))
    majority = float(counts.max() / total / k)
    return max(uniform, majority)


def test_chance_miou_of_known_maps():
    half = np.array([[0, 0], [1, 1]])
    assert math.isclose(chance_miou([half]), 1 / 3)  # uniform: each class 2 / (4 + 2)
    skewed = np.array([[0, 0, 0, 255], [0, 0, 0, 1]])
    assert math.isclose(chance_miou([skewed]), max((6 / 13 + 1 / 8) / 2, 6 / 7 / 2))  # the majority's


def train_losses(work_dir: Path) -> list[float]:
    """The total loss of every logged iteration, from the run's log (the visualizer's scalars.json
    goes to the first run's folder when runs share a process: mmengine keeps one visualizer)."""
    log = next(work_dir.glob('*/*.log')).read_text()
    return [float(v) for v in re.findall(r'Iter\(train\) \[ *\d+/\d+\].*?  loss: ([0-9.eE+-]+|nan|inf)', log)]


@pytest.mark.slow
def test_the_full_mask2former_semantic_toy_run_beats_chance(tmp_path, monkeypatch):
    """python tools/train.py configs/toy/mask2former_inline-swin-mini_toy-ade.py, as configured
    (the toy ADE20K data generated on first use), then tools/test.py: mIoU >= chance + 0.3."""
    monkeypatch.chdir(tmp_path)
    train, test = import_tool('train'), import_tool('test')
    config = str(TOY / 'mask2former_inline-swin-mini_toy-ade.py')
    options = ['randomness.seed=0', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None', *TRAIN_LOADER]
    train.main([config, '--work-dir', str(tmp_path / 'work'), '--cfg-options', *options])
    checkpoint = tmp_path / 'work' / 'iter_300.pth'
    assert checkpoint.is_file()
    metrics = test.main([config, str(checkpoint), '--work-dir', str(tmp_path / 'test'),
                         '--cfg-options', *TEST_LOADER])
    import cv2
    maps = [cv2.imread(str(p), cv2.IMREAD_GRAYSCALE).astype(np.int64) - 1  # reduce_zero_label: 0 -> ignored
            for p in sorted((tmp_path / 'data' / 'toy_ade' / 'annotations' / 'validation').glob('*.png'))]
    maps = [np.where(m < 0, 255, m) for m in maps]
    assert len(maps) == 40
    chance = chance_miou(maps)
    assert metrics['mIoU'] / 100 >= chance + 0.3, (metrics['mIoU'], chance)


@pytest.mark.slow
@pytest.mark.parametrize(('config', 'iters'), [('dino-4scale_inline-swin-mini_toy-coco.py', 60),
                                           ('mask2former_inline-swin-mini_toy-coco.py', 40)])
def test_the_detectors_loss_falls_in_a_short_run(config, iters, toy_dir, tmp_path, monkeypatch):
    """The first ``iters`` iterations of the toy schedule (batch 2): the mean total loss of the
    last 5 is at most 0.85 of the first 5's."""
    monkeypatch.chdir(toy_dir)
    train = import_tool('train')
    options = [f'train_cfg.max_iters={iters}', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
               'train_dataloader.batch_size=2', 'default_hooks.logger.interval=1',
               f'default_hooks.checkpoint.interval={iters}', 'randomness.seed=0', *TRAIN_LOADER]
    train.main([str(TOY / config), '--work-dir', str(tmp_path), '--cfg-options', *options])
    losses = train_losses(tmp_path)
    assert len(losses) == iters
    assert all(map(math.isfinite, losses))
    first, last = np.mean(losses[:5]), np.mean(losses[-5:])
    assert last <= 0.85 * first, f'the loss went from {first:.2f} to {last:.2f} in {iters} iterations'
