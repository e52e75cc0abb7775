"""The shipped configs under distributed training (tools/dist_train.sh, DDP).

DDP refuses a parameter that took no part in the loss ("parameters that were not used in
producing loss", at the second iteration). A backbone output that the neck skips (FPN's
``start_level``) leaves that output's norm unused: the toy RetinaNet did so until it stopped
returning stage 0, as the full-size PVT RetinaNet configs do.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = json.loads((ROOT / 'tests' / 'data' / 'merged_configs.json').read_text())


def _tuple(value):
    return value['__tuple__'] if isinstance(value, dict) and '__tuple__' in value else value


INLINE_FPN = sorted(name for name, cfg in SNAPSHOT.items()
                    if cfg['model']['backbone']['type'].startswith('InLine')
                    and cfg['model'].get('neck', {}).get('type') == 'FPN')


def test_the_snapshot_holds_inline_fpn_detectors():
    assert 'toy/retinanet_inline-pvt-mini_fpn_toy-coco.py' in INLINE_FPN
    assert len(INLINE_FPN) >= 20


@pytest.mark.parametrize('name', INLINE_FPN)
def test_every_backbone_output_feeds_the_neck(name):
    """The FPN reads every returned stage (start_level 0, one input channel count per stage)."""
    model = SNAPSHOT[name]['model']
    backbone, neck = model['backbone'], model['neck']
    out_indices = _tuple(backbone.get('out_indices', [0, 1, 2, 3]))
    skipped = out_indices[:neck.get('start_level', 0)]
    assert not skipped, f'{name}: the FPN skips backbone outputs {skipped}'
    assert len(neck['in_channels']) == len(out_indices), (neck['in_channels'], out_indices)
    assert neck.get('end_level', -1) in (-1, len(out_indices) - 1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def dist_train(config: str, work: Path, cwd: Path, max_iters: int) -> str:
    """bash tools/dist_train.sh configs/toy/CONFIG 2 (torchrun, gloo on CPU) for ``max_iters``
    iterations of batch 2; checks the run and returns its log."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PORT=str(_free_port()), PYTHON=sys.executable,
               OMP_NUM_THREADS='1')
    options = [f'train_cfg.max_iters={max_iters}', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
               'train_dataloader.batch_size=2', 'train_dataloader.num_workers=0',
               'train_dataloader.persistent_workers=False', 'default_hooks.logger.interval=1',
               f'default_hooks.checkpoint.interval={max_iters}']
    cmd = ['bash', str(ROOT / 'tools' / 'dist_train.sh'), str(ROOT / 'configs' / 'toy' / config), '2',
           '--work-dir', str(work), '--cfg-options', *options]
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    output = res.stdout + res.stderr
    assert 'were not used in producing loss' not in output, output[-3000:]
    assert res.returncode == 0, output[-3000:]
    log = next(work.glob('*/*.log')).read_text()
    assert 'Distributed training: True' in log
    assert 'GPU number: 2' in log
    assert f'Iter(train) [{max_iters}/{max_iters}]' in log
    assert (work / f'iter_{max_iters}.pth').is_file()
    return log


@pytest.mark.slow
def test_toy_retinanet_trains_with_two_processes(toy_dir, tmp_path):
    """Three iterations: DDP's unused parameter check passes at iterations 2 and 3."""
    dist_train('retinanet_inline-pvt-mini_fpn_toy-coco.py', tmp_path / 'retina', toy_dir, 3)


@pytest.mark.slow
@pytest.mark.parametrize('config', ['dino-4scale_inline-swin-mini_toy-coco.py',
                                    'mask2former_inline-swin-mini_toy-coco.py',
                                    'mask2former_inline-swin-mini_toy-ade.py'])
def test_query_head_toys_train_with_two_processes(config, toy_dir, tmp_path):
    """DINO and Mask2Former: every parameter takes part in the loss (DDP checks it from
    iteration 2 on), and the two processes' gradients are reduced over gloo."""
    dist_train(config, tmp_path / 'work', toy_dir, 2)


@pytest.mark.slow
@pytest.mark.parametrize('config', ['mask-rcnn_inline-deit-mini_simple-fpn_toy-coco.py',
                                    'upernet_inline-deit-mini_toy-ade.py'])
def test_plain_backbone_toys_train_with_two_processes(config, toy_dir, tmp_path):
    """InLine-DeiT through ViTDet's simple pyramid (layer-wise lr decay) and through mmseg's
    MultiLevelNeck: every parameter takes part in the loss under DDP."""
    dist_train(config, tmp_path / 'work', toy_dir, 2)
