"""End to end on CPU with the toy configs: train a few iterations, checkpoint, resume (the
iteration counter and the optimizer state carry on), evaluate with the real metric; the main-job
demo; and a 2-process torchrun (gloo) training run.

Tiny settings keep it short: 64x64 images, 8 train / 3 val images, 2 + 2 iterations.
"""
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (registers the backbones; checkpoints load with weights_only=True)
from helpers import TOY_DATA, import_tool

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / 'configs' / 'toy'
pytestmark = [pytest.mark.usefixtures('one_thread'), pytest.mark.stack]  # one_thread: tiny tensors on shared cores

CONFIGS: dict[str, dict] = {
    'mask-rcnn_inline-swin-mini_fpn_toy-coco.py': dict(metrics=('coco/bbox_mAP', 'coco/segm_mAP'), resume='path'),
    'cascade-mask-rcnn_inline-cswin-mini_fpn_toy-coco.py': dict(metrics=('coco/bbox_mAP', 'coco/segm_mAP'),
                                                                resume='path'),
    # an untrained RetinaNet scores everything below the default 0.05 threshold: keep all boxes
    'retinanet_inline-pvt-mini_fpn_toy-coco.py': dict(metrics=('coco/bbox_mAP',), resume='path',
                                                      options=['model.test_cfg.score_thr=0.0']),
    'upernet_inline-swin-mini_toy-ade.py': dict(metrics=('mIoU', 'mAcc', 'aAcc'), resume='auto'),
    'fpn_inline-pvt-mini_toy-ade.py': dict(metrics=('mIoU', 'mAcc', 'aAcc'), resume='auto'),
    # the plain backbone: ViTDet's simple pyramid and layer decay; mmseg's MultiLevelNeck
    'mask-rcnn_inline-deit-mini_simple-fpn_toy-coco.py': dict(metrics=('coco/bbox_mAP', 'coco/segm_mAP'),
                                                              resume='path'),
    'upernet_inline-deit-mini_toy-ade.py': dict(metrics=('mIoU', 'mAcc', 'aAcc'), resume='auto'),
}


def quick_options(max_iters: int) -> list[str]:
    """--cfg-options for a few iterations, a checkpoint every iteration, no validation while training."""
    opts = [f'train_cfg.max_iters={max_iters}', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
            'train_dataloader.batch_size=2', 'default_hooks.checkpoint.interval=1',
            'default_hooks.checkpoint.max_keep_ckpts=-1', 'default_hooks.logger.interval=1',
            'randomness.seed=0']
    for loader in ('train_dataloader', 'test_dataloader'):
        opts += [f'{loader}.num_workers=0', f'{loader}.persistent_workers=False']
    return opts


def load_ckpt(path: Path) -> dict:
    return torch.load(str(path), map_location='cpu', weights_only=True)


def optimizer_steps(ckpt: dict) -> int:
    """The step count AdamW keeps per parameter (all equal)."""
    steps = {int(s['step']) for s in ckpt['optimizer']['state'].values()}
    assert len(steps) == 1, steps
    return steps.pop()


def checkpoints(work_dir: Path) -> list[str]:
    return sorted(p.name for p in work_dir.glob('iter_*.pth'))


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(CONFIGS))
def test_train_checkpoint_resume_evaluate(name, toy_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(toy_dir)
    train, test = import_tool('train'), import_tool('test')
    spec = CONFIGS[name]
    config = str(TOY / name)
    extra = spec.get('options', [])

    first = tmp_path / 'first'
    train.main([config, '--work-dir', str(first), '--cfg-options', *quick_options(2), *extra])
    assert checkpoints(first) == ['iter_1.pth', 'iter_2.pth']
    assert (first / 'last_checkpoint').read_text().strip().endswith('iter_2.pth')
    assert load_ckpt(first / 'iter_2.pth')['meta']['iter'] == 2

    if spec['resume'] == 'path':  # resume into a fresh work dir from an explicit checkpoint
        resumed = tmp_path / 'resumed'
        train.main([config, '--work-dir', str(resumed), '--resume', str(first / 'iter_2.pth'),
                    '--cfg-options', *quick_options(4), *extra])
        assert checkpoints(resumed) == ['iter_3.pth', 'iter_4.pth'], 'training restarted instead of resuming'
        final, want = resumed / 'iter_4.pth', 4
    else:  # --resume alone: the latest checkpoint of the work dir
        train.main([config, '--work-dir', str(first), '--resume', '--cfg-options', *quick_options(3), *extra])
        assert checkpoints(first) == ['iter_1.pth', 'iter_2.pth', 'iter_3.pth']
        final, want = first / 'iter_3.pth', 3
    ckpt = load_ckpt(final)
    assert ckpt['meta']['iter'] == want
    assert optimizer_steps(ckpt) == want, 'the optimizer state was not restored on resume'

    preds = tmp_path / 'preds.pkl'
    metrics = test.main([config, str(final), '--work-dir', str(tmp_path / 'test'), '--out', str(preds),
                         '--cfg-options', *quick_options(1), *extra])
    for key in spec['metrics']:
        assert key in metrics, f'{key} missing from {sorted(metrics)}'
        assert math.isfinite(float(metrics[key])), (key, metrics[key])
    assert preds.stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize(('name', 'pictures'), [
    ('mask-rcnn_inline-swin-mini_fpn_toy-coco.py', '*.jpg'),  # DetVisualizationHook: one file per image
    ('fpn_inline-pvt-mini_toy-ade.py', 'vis_data/vis_image/*.png'),  # SegVisualizationHook: via the visualizer
])
def test_test_tool_draws_predictions(name, pictures, toy_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(toy_dir)
    train, test = import_tool('train'), import_tool('test')
    config = str(TOY / name)
    train.main([config, '--work-dir', str(tmp_path), '--cfg-options', *quick_options(1)])
    show = tmp_path / 'show'
    test.main([config, str(tmp_path / 'iter_1.pth'), '--work-dir', str(tmp_path), '--show-dir', str(show),
               '--cfg-options', *quick_options(1), 'visualizer.name=vis_' + tmp_path.name])
    assert len(list(show.glob(pictures))) == TOY_DATA['num_val']


@pytest.mark.slow
def test_demo_toy(toy_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(toy_dir)
    demo = import_tool('demo_toy')
    metrics = demo.main(['--max-iters', '2', '--work-dir', str(tmp_path), '--num-pictures', '2',
                         '--cfg-options', *quick_options(2)[4:]])
    assert math.isfinite(metrics['coco/bbox_mAP'])
    assert math.isfinite(metrics['coco/segm_mAP'])
    import cv2
    picture = cv2.imread(str(tmp_path / 'predictions.png'))
    assert picture is not None
    assert picture.shape[0] == 2 * 3 * TOY_DATA['image_size']  # 2 rows, 3x upscaled


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_process_cpu_training(toy_dir, tmp_path):
    """torchrun --nproc_per_node 2 through tools/dist_train.sh, gloo backend, no GPU."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PORT=str(free_port()), PYTHON=sys.executable,
               OMP_NUM_THREADS='1')
    work = tmp_path / 'dist'
    cmd = ['bash', str(ROOT / 'tools' / 'dist_train.sh'), str(TOY / 'fpn_inline-pvt-mini_toy-ade.py'), '2',
           '--work-dir', str(work), '--cfg-options', *quick_options(2)]
    res = subprocess.run(cmd, cwd=toy_dir, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert checkpoints(work) == ['iter_1.pth', 'iter_2.pth']
    log = next(work.glob('*/*.log')).read_text()
    assert 'Distributed training: True' in log
    assert 'GPU number: 2' in log
    assert "backend='gloo'" in log or '"gloo"' in log or "'gloo'" in log


@pytest.mark.slow
@pytest.mark.parametrize(('package', 'name'), [
    ('mmdet', 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py'),
    ('mmseg', 'upernet_inline-swin-mini_toy-ade.py'),
])
def test_config_runs_with_the_packages_own_train_tool(package, name, toy_dir, tmp_path):
    """The configs need nothing from tools/: mmdet's / mmseg's shipped tools/train.py train them."""
    import importlib
    tool = Path(importlib.import_module(package).__file__).parent / '.mim' / 'tools' / 'train.py'
    assert tool.is_file(), f'{package} no longer ships {tool}'
    env = dict(os.environ, CUDA_VISIBLE_DEVICES='', OMP_NUM_THREADS='1')
    res = subprocess.run([sys.executable, str(tool), str(TOY / name), '--work-dir', str(tmp_path),
                          '--cfg-options', *quick_options(1)],
                         cwd=toy_dir, env=env, capture_output=True, text=True, timeout=300)
    from importlib import metadata
    if package == 'mmseg' and not any(d.metadata['Name'] == 'mmsegmentation' for d in metadata.distributions()):
        # onedl-mmsegmentation: mmseg's own tool reads the config (its mmseg:: bases, which mmengine looks up by
        # the distribution name 'mmsegmentation') before any custom_imports run, so our resolve_mmseg_configs
        # cannot reach it; our tools/train.py applies it. Known upstream limitation, kept visible here.
        assert res.returncode != 0, res.stderr[-3000:]
        assert 'mmsegmentation is not installed' in res.stderr, res.stderr[-3000:]
        return
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert checkpoints(tmp_path) == ['iter_1.pth']
