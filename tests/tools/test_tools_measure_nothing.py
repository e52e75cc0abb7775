"""Tools exit non-zero, with one line, when they measured nothing:
benchmark --device cuda without CUDA, a benchmark whose table holds only failures, and
export_onnx / get_flops / benchmark on a config whose head cannot run on a plain image batch
(mmseg's Mask2Former: refused before any export is tried)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import import_tool
from inline_dense.openmmlab.config_model import ConfigModel, UnsupportedConfigModel

ROOT = Path(__file__).resolve().parents[2]
M2F_ADE = str(ROOT / 'configs' / 'toy' / 'mask2former_inline-swin-mini_toy-ade.py')
UPERNET = str(ROOT / 'configs' / 'toy' / 'upernet_inline-swin-mini_toy-ade.py')


@pytest.mark.parametrize('device', ['cuda', 'cuda:0'])
def test_benchmark_refuses_cuda_without_cuda(device, monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    with pytest.raises(SystemExit) as info:
        import_tool('benchmark').parse_args(['--models', 'inline-swin-t', '--device', device])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2
    assert 'sees no CUDA GPU' in err[-1]
    assert '--device cpu' in err[-1]


def test_benchmark_refuses_a_device_that_is_none(capsys):
    with pytest.raises(SystemExit):
        import_tool('benchmark').parse_args(['--models', 'inline-swin-t', '--device', 'gpu'])
    assert "is not a device" in capsys.readouterr().err


def test_benchmark_exits_non_zero_when_every_job_failed(tmp_path, monkeypatch, capsys):
    tool = import_tool('benchmark')

    def failing(planned, *args, **kwargs):
        return [job.error_row('RuntimeError: boom') for job in planned]
    monkeypatch.setattr(tool.jobs, 'run_sweep', failing)
    out = tmp_path / 'sweep.json'
    argv = ['--models', 'inline-pvt-t', '--resolutions', '64x64', '--modes', 'infer', '--out', str(out), '--no-plot']
    assert tool.main(argv) == 1
    assert 'nothing was measured: every job failed (first: RuntimeError: boom)' in capsys.readouterr().err
    assert json.loads(out.read_text())['results'][0]['error'] == 'RuntimeError: boom'  # the table is still kept


def test_mmseg_mask2former_is_refused_in_one_line():
    with pytest.raises(UnsupportedConfigModel, match=r'Mask2FormerHead\.forward needs batch_data_samples') as info:
        ConfigModel(M2F_ADE)
    assert len(str(info.value).splitlines()) == 1
    assert 'UPerNet' in str(info.value)
    assert ConfigModel(UPERNET).eval()(torch.zeros(1, 3, 64, 64)).shape[1] > 0  # a logits head still runs


def test_export_onnx_refuses_mask2former_before_exporting(tmp_path, capsys, monkeypatch):
    tool = import_tool('export_onnx')
    from inline_dense.deploy import onnx_export
    monkeypatch.setattr(onnx_export, 'export_onnx', lambda *a, **k: pytest.fail('an export was tried'))
    assert tool.main([M2F_ADE, '--out', str(tmp_path / 'm2f.onnx')]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert 'Mask2FormerHead' in err[0]
    assert not (tmp_path / 'm2f.onnx').exists()


def test_get_flops_refuses_mask2former():
    with pytest.raises(UnsupportedConfigModel, match='cannot be exported to ONNX, counted or benchmarked'):
        import_tool('get_flops').main(['--config', M2F_ADE, '--shapes', '64x64'])


@pytest.mark.slow
def test_benchmark_on_mask2former_exits_non_zero(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / 'tools' / 'benchmark.py'), '--config', M2F_ADE,
                           '--resolutions', '64x64', '--modes', 'infer', '--runs', '1', '--warmup', '0',
                           '--out', str(tmp_path / 'b.json'), '--no-plot'], capture_output=True, text=True,
                          timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 1
    assert 'Mask2FormerHead.forward needs' in proc.stderr.splitlines()[-1]
