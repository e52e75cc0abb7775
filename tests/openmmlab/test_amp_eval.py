"""``--amp`` in tools/test.py and tools/demo_toy.py: the model runs under bf16 autocast, the metrics
get float32 predictions, and a CPU without native bf16 (faked) runs float32 after one line."""
import math
import pickle
from pathlib import Path

import pytest
import torch
from mmengine.structures import InstanceData

from helpers import import_tool, quick_toy_options, train_toy_checkpoint
from inline_dense.layers.inline_attention import InLineAttention
from inline_dense.openmmlab.engine.amp import to_float32
from inline_dense.runtime import precision

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / 'configs' / 'toy' / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
pytestmark = pytest.mark.usefixtures('one_thread')


def test_to_float32_casts_floats_and_keeps_integers():
    inst = InstanceData(bboxes=torch.ones(2, 4, dtype=torch.bfloat16), labels=torch.tensor([1, 2]),
                        scores=torch.rand(2).half())
    out = to_float32([inst])[0]
    assert out.bboxes.dtype == torch.float32
    assert out.scores.dtype == torch.float32
    assert out.labels.dtype == torch.int64


@pytest.fixture
def autocast_seen(monkeypatch):
    """Records, for every InLine attention call, whether CPU autocast was on."""
    seen = []
    forward = InLineAttention.forward

    def spy(self, *args, **kwargs):
        seen.append(torch.is_autocast_enabled('cpu'))
        return forward(self, *args, **kwargs)
    monkeypatch.setattr(InLineAttention, 'forward', spy)
    return seen


@pytest.fixture(scope='module')
def checkpoint(toy_dir, tmp_path_factory):
    return train_toy_checkpoint(CONFIG, toy_dir, tmp_path_factory.mktemp('amp_ckpt'))


@pytest.mark.slow
@pytest.mark.parametrize('native', [True, False])
def test_test_tool_amp(native, checkpoint, toy_dir, tmp_path, monkeypatch, autocast_seen, capsys):
    monkeypatch.chdir(toy_dir)
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: native)
    preds = tmp_path / 'preds.pkl'
    metrics = import_tool('test').main([CONFIG, str(checkpoint), '--amp', '--work-dir', str(tmp_path),
                                        '--out', str(preds), '--cfg-options', *quick_toy_options(1),
                                        f'visualizer.name=vis_amp_{native}'])
    assert math.isfinite(metrics['coco/bbox_mAP'])
    assert math.isfinite(metrics['coco/segm_mAP'])
    assert autocast_seen
    assert all(s is native for s in autocast_seen)
    fallback = [line for line in capsys.readouterr().err.splitlines() if line.startswith('[amp]')]
    assert len(fallback) == (0 if native else 1)
    with open(preds, 'rb') as f:
        dumped = pickle.load(f)
    assert dumped[0]['pred_instances']['bboxes'].dtype == torch.float32


@pytest.mark.slow
def test_demo_toy_amp_trains_and_evaluates_in_bf16(toy_dir, tmp_path, monkeypatch, autocast_seen):
    monkeypatch.chdir(toy_dir)
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)
    metrics = import_tool('demo_toy').main(['--amp', '--max-iters', '2', '--work-dir', str(tmp_path),
                                            '--num-pictures', '1', '--cfg-options', *quick_toy_options(2)[1:]])
    assert math.isfinite(metrics['coco/bbox_mAP'])
    # every training and evaluation call under autocast; the picture (drawn after) is float32
    assert sum(autocast_seen) >= 2 * 4 + 1
    dumped = (tmp_path / Path(CONFIG).name).read_text()
    assert 'CpuAmpOptimWrapper' in dumped
    assert 'AmpTestLoop' in dumped


@pytest.mark.slow
def test_demo_toy_checkpoint_evaluates_those_weights_both_ways(checkpoint, toy_dir, tmp_path, monkeypatch,
                                                                autocast_seen):
    """``demo_toy.py --checkpoint``: no training, the same metrics as ``tools/test.py`` on those weights;
    with ``--amp`` the same weights are evaluated under bf16 autocast."""
    monkeypatch.chdir(toy_dir)
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)
    demo = import_tool('demo_toy')
    opts = ['--num-pictures', '1', '--checkpoint', str(checkpoint), '--cfg-options', *quick_toy_options(1)]
    fp32 = demo.main(['--work-dir', str(tmp_path / 'fp32'), *opts, 'visualizer.name=vis_demo_fp32'])
    assert autocast_seen
    assert not any(autocast_seen)
    assert not list((tmp_path / 'fp32').glob('iter_*.pth')), 'the demo trained although given --checkpoint'
    tested = import_tool('test').main([CONFIG, str(checkpoint), '--work-dir', str(tmp_path / 'test'),
                                       '--cfg-options', *quick_toy_options(1), 'visualizer.name=vis_demo_ckpt'])
    assert fp32['coco/bbox_mAP'] == tested['coco/bbox_mAP']
    assert fp32['coco/segm_mAP'] == tested['coco/segm_mAP']
    autocast_seen.clear()
    bf16 = demo.main(['--work-dir', str(tmp_path / 'bf16'), '--amp', *opts, 'visualizer.name=vis_demo_bf16'])
    assert math.isfinite(bf16['coco/bbox_mAP'])
    assert any(autocast_seen)
    assert 'AmpTestLoop' in (tmp_path / 'bf16' / Path(CONFIG).name).read_text()


def test_demo_toy_checkpoint_that_does_not_exist_is_one_line(tmp_path):
    from inline_dense.openmmlab.engine.tool_inputs import ToolInputError
    with pytest.raises(ToolInputError, match=r'--checkpoint .*no such file') as info:  # run_tool: one line
        import_tool('demo_toy').main(['--checkpoint', str(tmp_path / 'missing.pth')])
    assert len(str(info.value).splitlines()) == 1
