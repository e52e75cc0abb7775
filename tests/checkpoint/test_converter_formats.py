"""tools/convert_checkpoint.py's output formats and sources: a ``.safetensors`` destination gets a
safetensors file (refused in one line without the package), and this project's own training
checkpoints (mmengine Runner files, with their HistoryBuffer pickled through ``getattr``) convert."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import inline_dense.checkpoint.saving as saving
from inline_dense.checkpoint import load_pretrained
from inline_dense.checkpoint.saving import OutputPathError
from inline_dense.models import InLineSwin
from inline_dense.models.convert import convert_file

ROOT = Path(__file__).resolve().parents[2]
SWIN = ROOT / 'tests' / 'data' / 'fixtures' / 'inline_swin_mini_authors_layout.pth'
MINI = dict(embed_dims=16, depths=(2, 2, 4, 2), num_heads=(1, 2, 4, 8), attn_type='IIMS2')


def run_tool(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS='1')
    return subprocess.run([sys.executable, str(ROOT / 'tools' / 'convert_checkpoint.py'), *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


def mini_from(path):
    torch.manual_seed(0)
    model = InLineSwin(**MINI)
    load_pretrained(model, str(path))
    return model.state_dict()


def test_safetensors_output_is_safetensors_and_loads_as_the_pth_does(tmp_path):
    safetensors = pytest.importorskip('safetensors', reason='the safetensors package is not installed')
    name, kept, _ = convert_file(str(SWIN), str(tmp_path / 'backbone.safetensors'))
    convert_file(str(SWIN), str(tmp_path / 'backbone.pth'))
    with safetensors.safe_open(str(tmp_path / 'backbone.safetensors'), 'pt') as f:
        assert len(list(f.keys())) == kept
        meta = f.metadata()
    assert json.loads(meta['backbone']) == name == 'InLineSwin'
    assert json.loads(meta['converted_from']) == str(SWIN)
    a, b = mini_from(tmp_path / 'backbone.safetensors'), mini_from(tmp_path / 'backbone.pth')
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_safetensors_output_without_the_package_is_refused_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setattr(saving, '_safetensors_save', lambda: None)
    with pytest.raises(OutputPathError, match=r'needs the safetensors package \(pip install safetensors\)') as info:
        convert_file(str(SWIN), str(tmp_path / 'backbone.SAFETENSORS'))
    assert '\n' not in str(info.value)
    assert not list(tmp_path.iterdir())


def test_the_tool_writes_safetensors(tmp_path):
    pytest.importorskip('safetensors', reason='the safetensors package is not installed')
    out = run_tool(SWIN, tmp_path / 'b.safetensors')
    assert out.returncode == 0, out.stderr
    assert (tmp_path / 'b.safetensors').read_bytes()[8:9] == b'{'  # safetensors: u64 header size, JSON header


def test_a_training_checkpoint_of_this_project_converts(tmp_path):
    """A Runner file: ``state_dict`` with ``backbone.`` keys and mmengine's message hub, whose
    HistoryBuffer pickles its statistics as ``getattr(HistoryBuffer, 'mean')``."""
    from mmengine.logging import MessageHub
    torch.manual_seed(0)
    backbone = InLineSwin(**MINI)
    load_pretrained(backbone, str(SWIN))
    hub = MessageHub.get_instance('converter_formats_test')
    hub.update_scalar('train/loss', 1.5)
    ckpt = {'meta': {'epoch': 0, 'iter': 4}, 'message_hub': hub.state_dict(),
            'state_dict': {**{f'backbone.{k}': v for k, v in backbone.state_dict().items()},
                           'neck.conv.weight': torch.zeros(2, 2)}}
    torch.save(ckpt, tmp_path / 'iter_4.pth')
    assert b'getattr' in (tmp_path / 'iter_4.pth').read_bytes()  # what was refused as possibly malicious
    out = run_tool(tmp_path / 'iter_4.pth', tmp_path / 'backbone.pth')
    assert out.returncode == 0, out.stderr
    assert 'InLineSwin: wrote' in out.stdout
    loaded = mini_from(tmp_path / 'backbone.pth')
    assert all(torch.equal(loaded[k], v) for k, v in backbone.state_dict().items())
