"""Interruption loses nothing: kill a training run (SIGKILL), resume it, get the same result.

The file is also the training script the tests run in processes of their own: a tiny classifier
with an InLine-Swin backbone (drop path and dropout on, random flips in the main process)
trained by an mmengine Runner with an IterBasedTrainLoop, checkpoints every 4 iterations
(``max_keep_ckpts=1``, the harshest setting), validation every 6.

    python tests/openmmlab/test_resume_kill.py WORK_DIR [--resume] [--kill-after N] [--kill-in-write N] [--plain]

Tolerance: the final weights and the final validation loss of a killed-and-resumed run
must equal those of the uninterrupted run bit for bit on CPU (max |diff| == 0).
"""
import argparse
import functools
import glob
import json
import multiprocessing
import os
import os.path as osp
import random
import shutil
import signal
import sys
import tempfile

import pytest
import torch

pytestmark = pytest.mark.stack  # CI repeats its end-to-end runs on the second stack

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
MAX_ITERS, CKPT_INTERVAL, VAL_INTERVAL = 12, 4, 6


# ------------------------------------------------------------------ the training script
def build_runner(work_dir: str, resume: bool, plain: bool, seed=0):
    import torch.nn.functional as F
    from mmengine.evaluator import BaseMetric
    from mmengine.model import BaseModel
    from mmengine.runner import Runner
    from torch import nn
    from torch.utils.data import Dataset

    import inline_dense.openmmlab.engine  # noqa: F401  (registers the hooks)
    from inline_dense.models import InLineSwin

    class Net(BaseModel):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = InLineSwin(embed_dims=16, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8),
                                       attn_type='IIMS1', window_size=4, drop_path_rate=0.3)
            self.drop = nn.Dropout(0.2)
            self.head = nn.Linear(128, 3)

        def forward(self, inputs, labels, mode='tensor'):
            logits = self.head(self.drop(self.backbone(inputs)[-1].mean((2, 3))))
            if mode == 'loss':
                return dict(loss=F.cross_entropy(logits, labels))
            return [(logits, labels)]

    class RandomImages(Dataset):
        def __init__(self, n: int, seed: int, train: bool) -> None:
            g = torch.Generator().manual_seed(seed)
            self.x = torch.randn(n, 3, 64, 64, generator=g)
            self.y = torch.randint(0, 3, (n,), generator=g)
            self.train = train

        def __len__(self) -> int:
            return len(self.y)

        def __getitem__(self, i: int) -> dict:
            x = self.x[i]
            if self.train and random.random() < 0.5:  # augmentation drawing from the main process
                x = x.flip(-1)
            return dict(inputs=x, labels=self.y[i])

    class ValLoss(BaseMetric):
        def process(self, data_batch, data_samples) -> None:
            for logits, labels in data_samples:
                self.results.append(F.cross_entropy(logits, labels, reduction='sum').item())

        def compute_metrics(self, results) -> dict:
            return dict(val_loss=sum(results))

    def loader(train: bool) -> dict:
        return dict(dataset=RandomImages(16 if train else 8, 1 if train else 2, train), batch_size=4,
                    num_workers=0, collate_fn=dict(type='default_collate'),
                    sampler=dict(type='InfiniteSampler' if train else 'DefaultSampler', shuffle=train))

    checkpoint = dict(type='CheckpointHook' if plain else 'AtomicCheckpointHook', interval=CKPT_INTERVAL,
                      by_epoch=False, max_keep_ckpts=1)
    torch.manual_seed(0)  # the head's initial weights (the backbone is re-initialised by the Runner)
    return Runner(
        model=Net(), work_dir=work_dir,
        train_dataloader=loader(True), val_dataloader=loader(False), val_evaluator=[ValLoss()],
        train_cfg=dict(type='IterBasedTrainLoop', max_iters=MAX_ITERS, val_interval=VAL_INTERVAL),
        val_cfg=dict(type='ValLoop'),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=1e-3)),
        param_scheduler=dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=MAX_ITERS),
        default_hooks=dict(checkpoint=checkpoint, logger=dict(type='LoggerHook', interval=1)),
        custom_hooks=[] if plain else [dict(type='DeterministicResumeHook')],
        randomness=dict(seed=seed, deterministic=True),
        resume=resume, default_scope='mmengine')


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument('work_dir')
    parser.add_argument('--resume', action='store_true')
    parser.add_argument('--kill-after', type=int, help='SIGKILL itself after this training iteration')
    parser.add_argument('--kill-in-write', type=int, help='SIGKILL itself half-way through writing this '
                                                          "iteration's checkpoint")
    parser.add_argument('--plain', action='store_true', help="mmengine's own CheckpointHook, no reseeding")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runner = build_runner(args.work_dir, args.resume, args.plain)
    if args.kill_after:
        from mmengine.hooks import Hook

        class Kill(Hook):
            priority = 'LOWEST'

            def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
                if runner.iter + 1 == args.kill_after:
                    os.kill(os.getpid(), signal.SIGKILL)
        runner.register_hook(Kill())
    if args.kill_in_write:
        from mmengine.fileio.backends import LocalBackend
        put = LocalBackend.put
        target = f'iter_{args.kill_in_write}.pth'

        def dying_put(self, obj, filepath):
            if osp.basename(str(filepath)).endswith(target):
                with open(filepath, 'wb') as f:
                    f.write(obj[:len(obj) // 2])
                    f.flush()
                    os.fsync(f.fileno())
                os.kill(os.getpid(), signal.SIGKILL)
            return put(self, obj, filepath)
        LocalBackend.put = dying_put
    model = runner.train()
    metrics = runner.val()
    torch.save(model.state_dict(), osp.join(args.work_dir, 'final_weights.pth'))
    with open(osp.join(args.work_dir, 'final_metrics.json'), 'w') as f:
        json.dump(metrics, f)


# ------------------------------------------------------------------ the tests
def _in_child(run, log_path, cwd=None, env=None) -> None:
    """``run()`` in a forked child, its output into ``log_path``, in ``cwd`` (also first on the
    import path) with ``env`` added to the environment."""
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    if cwd:
        os.chdir(cwd)
        sys.path.insert(0, str(cwd))
    os.environ.update(env or {})
    run()


def _train_tool(argv) -> None:
    from helpers import import_tool
    import_tool('train').main(argv)


# conftest installs the suite's mmengine caches (tests/mmengine_caches.py): they serve every forked run too
_PRELOAD = ['torch', 'mmengine.runner', 'mmengine.evaluator', 'mmengine.model', 'inline_dense.openmmlab.engine',
            'inline_dense.models', 'conftest', 'helpers', __name__]


def forked(run, expect_kill=False, cwd=None, env=None) -> str:
    """``run()`` in a new process; returns what it printed.

    The process is forked from a server that has imported torch, mmengine and inline_dense once
    (``forkserver`` with a preload): every run is still a process of its own, killed for real,
    without paying 3 s of imports each time. The server itself is single-threaded when it forks."""
    context = multiprocessing.get_context('forkserver')
    context.set_forkserver_preload(_PRELOAD)
    fd, log_path = tempfile.mkstemp(suffix='.log')
    os.close(fd)
    proc = context.Process(target=_in_child, args=(run, log_path, cwd, env))
    proc.start()
    proc.join(timeout=300)
    if proc.is_alive():
        proc.kill()
        proc.join()
    with open(log_path, errors='replace') as f:
        printed = f.read()
    os.remove(log_path)
    assert proc.exitcode == (-signal.SIGKILL if expect_kill else 0), (proc.exitcode, printed[-3000:])
    return printed


def train(work_dir, *flags, expect_kill=False) -> str:
    """One run of the training script in a new process (:func:`forked`); returns what it printed."""
    return forked(functools.partial(main, [str(work_dir), *flags]), expect_kill)


def final(work_dir):
    weights = torch.load(osp.join(work_dir, 'final_weights.pth'), weights_only=True)
    with open(osp.join(work_dir, 'final_metrics.json')) as f:
        return weights, json.load(f)


def weight_diff(a, b) -> float:
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


def pointer(work_dir) -> str:
    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        return f.read().strip()


@pytest.fixture(scope='module')
def reference(tmp_path_factory):
    """Final weights and metrics of the uninterrupted run."""
    work = tmp_path_factory.mktemp('uninterrupted')
    train(work)
    return final(work)


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_weights_and_metric(reference, tmp_path):
    train(tmp_path, '--kill-after', '10', expect_kill=True)
    assert pointer(tmp_path).endswith('iter_8.pth')
    assert not osp.exists(osp.join(tmp_path, 'final_weights.pth'))
    train(tmp_path, '--resume')
    weights, metrics = final(tmp_path)
    ref_weights, ref_metrics = reference
    diff = weight_diff(weights, ref_weights)
    print(f'\nkilled after iter 10, resumed from iter 8: max |weight diff| = {diff}, '
          f'val_loss {metrics} vs {ref_metrics}')
    assert diff == 0.0
    assert metrics == ref_metrics


@pytest.mark.slow
def test_kill_during_checkpoint_write_leaves_a_good_latest_checkpoint(reference, tmp_path):
    from inline_dense.openmmlab.engine import is_complete_checkpoint
    train(tmp_path, '--kill-in-write', '8', expect_kill=True)
    latest = pointer(tmp_path)
    assert latest.endswith('iter_4.pth')
    assert is_complete_checkpoint(latest)
    partial = [n for n in os.listdir(tmp_path) if 'iter_8' in n]
    assert partial, partial
    assert not any(is_complete_checkpoint(osp.join(tmp_path, n)) for n in partial), partial
    assert not osp.exists(osp.join(tmp_path, 'iter_8.pth'))  # only the temporary file is partial
    train(tmp_path, '--resume')
    weights, metrics = final(tmp_path)
    assert weight_diff(weights, reference[0]) == 0.0
    assert metrics == reference[1]
    assert not [n for n in os.listdir(tmp_path) if n.startswith('.tmp-')]  # replaced by the resumed run


@pytest.mark.slow
def test_resume_skips_a_truncated_latest_checkpoint(reference, tmp_path):
    """What mmengine's own hook can leave behind, a pointer to a truncated file: the
    AtomicCheckpointHook resumes from the newest complete checkpoint instead."""
    train(tmp_path, '--kill-after', '6', expect_kill=True)
    older = pointer(tmp_path)
    assert older.endswith('iter_4.pth')
    kept = tmp_path / 'kept.pth'
    shutil.copy(older, kept)
    train(tmp_path, '--resume', '--kill-after', '10', expect_kill=True)
    latest = pointer(tmp_path)
    assert latest.endswith('iter_8.pth')
    assert not osp.exists(older)  # max_keep_ckpts=1 removed it
    shutil.move(kept, older)
    with open(latest, 'rb') as f:
        data = f.read()
    with open(latest, 'wb') as f:
        f.write(data[:len(data) // 3])
    printed = train(tmp_path, '--resume')
    assert 'missing or truncated' in printed
    weights, metrics = final(tmp_path)
    assert weight_diff(weights, reference[0]) == 0.0
    assert metrics == reference[1]


@pytest.mark.slow
def test_without_reseeding_a_resumed_run_differs(reference, tmp_path):
    """The check above has teeth: mmengine alone (no DeterministicResumeHook) resumes with
    other random numbers (drop path, dropout, flips), so the weights differ."""
    plain_ref = tmp_path / 'plain_uninterrupted'
    train(plain_ref, '--plain')
    resumed = tmp_path / 'plain_resumed'
    train(resumed, '--plain', '--kill-after', '10', expect_kill=True)
    train(resumed, '--plain', '--resume')
    assert weight_diff(final(resumed)[0], final(plain_ref)[0]) > 0.0


def test_checkpoint_helpers(tmp_path):
    from inline_dense.openmmlab.engine import atomic_write_text, is_complete_checkpoint, newest_complete_checkpoint
    for i in (1, 2, 3):
        torch.save({'w': torch.ones(3) * i}, tmp_path / f'iter_{i}.pth')
    data = (tmp_path / 'iter_3.pth').read_bytes()
    (tmp_path / 'iter_3.pth').write_bytes(data[:-10])
    assert is_complete_checkpoint(str(tmp_path / 'iter_2.pth'))
    assert not is_complete_checkpoint(str(tmp_path / 'iter_3.pth'))
    assert not is_complete_checkpoint(str(tmp_path / 'nothing.pth'))
    assert not is_complete_checkpoint('')
    assert newest_complete_checkpoint(str(tmp_path), 'iter_{}.pth') == str(tmp_path / 'iter_2.pth')
    atomic_write_text(str(tmp_path / 'last_checkpoint'), 'a')
    atomic_write_text(str(tmp_path / 'last_checkpoint'), 'b')
    assert (tmp_path / 'last_checkpoint').read_text() == 'b'
    assert sorted(os.listdir(tmp_path)) == ['iter_1.pth', 'iter_2.pth', 'iter_3.pth', 'last_checkpoint']


def test_a_resume_outside_the_tool_that_cannot_be_exact_says_so(tmp_path):
    """Without tools/train.py, a run with no fixed seed builds its sampler before the checkpoint's
    seeds are read: the hook restores the generators and warns that the data order differs."""
    import logging

    from mmengine.logging import MMLogger

    from inline_dense.openmmlab.engine.randomness import RNG_KEY
    torch.set_num_threads(1)
    first = build_runner(str(tmp_path), False, False, seed=None)
    first.train()
    saved = torch.load(tmp_path / f'iter_{MAX_ITERS}.pth', weights_only=True)[RNG_KEY]
    assert saved['seed'] == first.seed
    assert saved['sampler_seed'] == first.train_dataloader.sampler.seed
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    second = build_runner(str(tmp_path), True, False, seed=None)
    MMLogger.get_current_instance().addHandler(handler)
    second.train()
    assert any('this resume is NOT exact' in line and f'randomness.seed={saved["seed"]}' in line for line in lines)


def test_atomic_write_leaves_no_temporary_file_on_error(tmp_path):
    from inline_dense.checkpoint.atomic import OutputPathError
    from inline_dense.openmmlab.engine import atomic_write_text
    (tmp_path / 'last_checkpoint').mkdir()  # refused before anything is written (os.replace would fail)
    with pytest.raises(OutputPathError, match='is a directory'):
        atomic_write_text(str(tmp_path / 'last_checkpoint'), 'a')
    assert os.listdir(tmp_path) == ['last_checkpoint']


def test_derived_seeds_depend_on_step_and_rank():
    from inline_dense.openmmlab.engine import derived_seed
    seeds = {derived_seed(0, 'iter', i) for i in range(100)}
    assert len(seeds) == 100
    assert derived_seed(0, 'iter', 5) == derived_seed(0, 'iter', 5) != derived_seed(0, 'iter', 5, rank=1)
    assert derived_seed(0, 'iter', 5) != derived_seed(1, 'iter', 5) != derived_seed(0, 'epoch', 5)


if __name__ == '__main__':
    main()


# ------------------------------------------------------------------ with tools/train.py and a toy config
KILLER = '''
import os, signal
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module()
class KillAfterIterHook(Hook):
    """SIGKILLs the process after the iteration named by $KILL_AFTER_ITER (tests only)."""
    priority = 'LOWEST'

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        if runner.iter + 1 == int(os.environ.get('KILL_AFTER_ITER', 0)):
            os.kill(os.getpid(), signal.SIGKILL)
'''
TOY_CONFIG = 'retinanet_inline-pvt-mini_fpn_toy-coco.py'
TOY_ITERS = 6


def toy_train(cwd, config, work_dir, *flags, kill_after=0):
    """tools/train.py's main in a new process (:func:`forked`) working in ``cwd``."""
    argv = [str(config), '--work-dir', str(work_dir), *flags]
    forked(functools.partial(_train_tool, argv), expect_kill=bool(kill_after), cwd=cwd,
           env=dict(KILL_AFTER_ITER=str(kill_after)))


def logged(work_dir, key):
    """{iteration or step: value} of ``key`` over all runs (timestamped folders) in ``work_dir``."""
    values = {}
    for path in sorted(glob.glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json'))):
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                if key in record:
                    values[record.get('iter', record.get('step'))] = record[key]
    return values


@pytest.mark.slow
def test_toy_config_killed_and_resumed_with_train_tool(tmp_path):
    """tools/train.py (its main, each run a process of its own) on the toy RetinaNet config as
    shipped (no fixed seed, a persistent data worker, random flips), killed with SIGKILL after
    iteration 4, its work directory moved, and resumed there with --resume: same weights, same
    losses, same mAP as an uninterrupted run."""
    pytest.importorskip('mmdet')
    from mmengine.config import Config

    from inline_dense.toy_data import make_toy_coco
    make_toy_coco(str(tmp_path / 'data' / 'toy_coco'), num_train=8, num_val=3, image_size=64)
    (tmp_path / 'killer.py').write_text(KILLER)
    base = osp.join(ROOT, 'configs', 'toy', TOY_CONFIG)
    imports = [*Config.fromfile(base).custom_imports['imports'], 'inline_dense.openmmlab.engine', 'killer']
    config = tmp_path / 'reliable.py'
    config.write_text(f'''_base_ = {base!r}
custom_imports = dict(imports={imports!r}, allow_failed_imports=False)
custom_hooks = [dict(type='DeterministicResumeHook'), dict(type='InLinePaddingMaskHook'),
                dict(type='KillAfterIterHook')]
default_hooks = dict(checkpoint=dict(type='AtomicCheckpointHook', by_epoch=False, interval=2, max_keep_ckpts=1),
                     logger=dict(type='LoggerHook', interval=1))
train_cfg = dict(max_iters={TOY_ITERS}, val_interval={TOY_ITERS})
train_dataloader = dict(batch_size=2)  # the shipped sampler and data worker, no fixed seed
# with a Resize, so that the meta information holds the scale_factor RetinaNet's predict needs
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations', with_bbox=True),
                 dict(type='Resize', scale=(64, 64), keep_ratio=True),
                 dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                                                       'scale_factor'))]
val_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
model = dict(test_cfg=dict(score_thr=0.0))
''')
    assert (Config.fromfile(base).get('randomness') or {}).get('seed') is None  # as shipped: no fixed seed
    toy_train(tmp_path, config, tmp_path / 'first', kill_after=4)
    assert pointer(tmp_path / 'first').endswith('iter_4.pth')
    seed = torch.load(tmp_path / 'first' / 'iter_4.pth', map_location='cpu', weights_only=True)['meta']['seed']
    shutil.move(tmp_path / 'first', tmp_path / 'killed')  # the work directory moves (pointer: old path)
    toy_train(tmp_path, config, tmp_path / 'killed', '--resume')
    # the uninterrupted run that the killed one was (mmengine drew its seed at random)
    toy_train(tmp_path, config, tmp_path / 'whole', '--cfg-options', f'randomness.seed={seed}')
    name = f'iter_{TOY_ITERS}.pth'
    whole = torch.load(tmp_path / 'whole' / name, map_location='cpu', weights_only=True)
    resumed = torch.load(tmp_path / 'killed' / name, map_location='cpu', weights_only=True)
    diff = weight_diff(resumed['state_dict'], whole['state_dict'])
    losses = {run: logged(tmp_path / run, 'loss') for run in ('whole', 'killed')}
    maps = {run: logged(tmp_path / run, 'coco/bbox_mAP') for run in ('whole', 'killed')}
    print(f'\ntoy RetinaNet killed after iter 4, resumed: max |weight diff| {diff}; losses {losses}; '
          f'bbox mAP {maps}')
    assert diff == 0.0
    assert losses['killed'] == losses['whole']
    assert len(losses['whole']) == TOY_ITERS
    assert maps['killed'] == maps['whole']
    assert maps['whole']
