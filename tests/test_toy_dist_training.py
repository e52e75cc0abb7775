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

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = json.loads((ROOT / 'tests' / 'data' / 'merged_configs.json').read_text())


def _tuple(value):
    return value['__tuple__'] if isinstance(value, dict) and '__tuple__' in value else value


INLINE_FPN = sorted(name for name, cfg in SNAPSHOT.items()
                    if cfg['model']['backbone']['type'].startswith('InLine')
                    and cfg['model'].get('neck', {}).get('type') == 'FPN')


def test_the_snapshot_holds_inline_fpn_detectors():
    assert 'toy/retinanet_inline-pvt-mini_fpn_toy-coco.py' in INLINE_FPN and len(INLINE_FPN) >= 20


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


@pytest.mark.slow
def test_toy_retinanet_trains_with_two_processes(toy_dir, tmp_path):
    """bash tools/dist_train.sh CONFIG 2 (torchrun, gloo on CPU), three iterations: DDP's unused
    parameter check passes at iterations 2 and 3."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES='', PORT=str(_free_port()), PYTHON=sys.executable,
               OMP_NUM_THREADS='1')
    work = tmp_path / 'retina'
    options = ['train_cfg.max_iters=3', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
               'train_dataloader.batch_size=2', 'train_dataloader.num_workers=0',
               'train_dataloader.persistent_workers=False', 'default_hooks.logger.interval=1',
               'default_hooks.checkpoint.interval=3']
    cmd = ['bash', str(ROOT / 'tools' / 'dist_train.sh'), str(ROOT / 'configs' / 'toy' /
           'retinanet_inline-pvt-mini_fpn_toy-coco.py'), '2', '--work-dir', str(work), '--cfg-options', *options]
    res = subprocess.run(cmd, cwd=toy_dir, env=env, capture_output=True, text=True, timeout=300)
    output = res.stdout + res.stderr
    assert 'were not used in producing loss' not in output, output[-3000:]
    assert res.returncode == 0, output[-3000:]
    log = next(work.glob('*/*.log')).read_text()
    assert 'Distributed training: True' in log and 'GPU number: 2' in log
    assert 'Iter(train) [3/3]' in log
    assert (work / 'iter_3.pth').is_file()
