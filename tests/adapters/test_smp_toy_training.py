"""The toy end-to-end run outside OpenMMLab (smp UPerNet + InLine-Swin on toy ADE20K) learns."""
import importlib.util
from pathlib import Path

import pytest

pytest.importorskip('segmentation_models_pytorch')

from inline_dense.smp_toy import lr_at, train_toy
from inline_dense.toy_data import make_toy_ade


def test_learning_rate_warms_up_then_decays_to_zero():
    assert lr_at(0.0, 1.0) < 0.05
    assert lr_at(0.05, 1.0) == pytest.approx(1.0)
    assert lr_at(0.5, 1.0) < lr_at(0.3, 1.0)
    assert lr_at(1.0, 1.0) == pytest.approx(0.0, abs=1e-12)


class StepClock:
    """A clock that moves one second each time it is read: the budget ends at a point fixed by the
    number of reads, not by the machine's speed."""

    def __init__(self):
        self.now = 0.0

    def perf_counter(self):
        self.now += 1.0
        return self.now


@pytest.mark.parametrize('budget', [4, 5, 6, 7, 8, 9])
def test_the_epoch_count_is_the_epochs_that_trained(tmp_path, monkeypatch, budget):
    """Wherever the time budget ends, at an epoch's first step included, ``epochs`` counts the
    epochs that took a step, one log line each."""
    import inline_dense.smp_toy as smp_toy
    monkeypatch.setattr(smp_toy, 'time', StepClock())
    root = make_toy_ade(str(tmp_path / 'toy_ade'), num_train=8, num_val=2, image_size=32)
    lines = []
    run = train_toy(root, encoder_kwargs=dict(embed_dims=8, depths=(1, 1, 1, 1), num_heads=(1, 1, 1, 1)),
                    train_seconds=budget, batch_size=4, log=lines.append)
    assert run.steps >= 1
    assert len(lines) == run.epochs == len(run.losses) == -(-run.steps // 2)


@pytest.mark.slow
def test_short_run_is_far_above_chance(tmp_path):
    """A shorter budget on smaller images than tools/train_smp_toy.py: learning must show."""
    root = make_toy_ade(str(tmp_path / 'toy_ade'), num_train=48, num_val=12, image_size=64)
    lines = []
    run = train_toy(root, train_seconds=30, batch_size=4, log=lines.append)
    assert run.steps >= 5
    assert len(lines) == run.epochs
    assert run.losses[-1] < run.losses[0]
    assert run.miou > run.chance_miou + 0.2, run
    assert set(run.class_iou) == {'sky', 'ground', 'circle', 'square', 'triangle'}


@pytest.mark.slow
def test_the_tool_reports_miou_as_json(tmp_path, capsys):
    root = make_toy_ade(str(tmp_path / 'toy_ade'), num_train=8, num_val=4, image_size=64)
    spec = importlib.util.spec_from_file_location(
        'train_smp_toy', Path(__file__).resolve().parents[2] / 'tools' / 'train_smp_toy.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    result = tool.main(['--root', root, '--decoder', 'FPN', '--variant', 'inline_pvt_t', '--seconds', '3',
                        '--batch-size', '4'])
    out = capsys.readouterr().out
    assert f'"miou": {result["miou"]}' in out
    assert 0 <= result['miou'] <= 1
    assert result['steps'] >= 1
    assert result['decoder'] == 'FPN'
    assert result['variant'] == 'inline_pvt_t'
