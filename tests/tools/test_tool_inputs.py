"""Command-line inputs the tools refuse in one line: a --work-dir that is a file,
--cfg-options text where a number is expected, dist_train.sh with 0 processes, a full cache
during a download, a damaged .safetensors file."""
import errno
import io
import os
import subprocess
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

import inline_dense.checkpoint.cache as cache_module
import inline_dense.checkpoint.download as download_module
from inline_dense.checkpoint import CheckpointError, DownloadError, read_checkpoint
from inline_dense.openmmlab.engine.tool_inputs import ToolInputError, check_cfg_options, check_work_dir

ROOT = Path(__file__).resolve().parents[2]
RETINANET_TOY = str(ROOT / 'configs' / 'toy' / 'retinanet_inline-pvt-mini_fpn_toy-coco.py')


@pytest.mark.parametrize('tool', ['train', 'test'])
def test_a_work_dir_that_is_a_file(tool, tmp_path, load_tool):
    blocker = tmp_path / 'results'
    blocker.write_text('not a directory')
    args = [RETINANET_TOY] + ([str(tmp_path / 'c.pth')] if tool == 'test' else [])
    with pytest.raises(ToolInputError, match='results is a file; the logs and checkpoints need a directory'):
        load_tool(tool).main([*args, '--work-dir', str(blocker)])
    with pytest.raises(ToolInputError, match=f'is inside {blocker}, which is a file'):
        check_work_dir(str(blocker / 'sub'))
    check_work_dir(str(tmp_path / 'new' / 'dir'))  # missing directories are fine: they are created


def test_text_where_a_number_is_expected(load_tool):
    with pytest.raises(ToolInputError) as info:
        load_tool('train').main([RETINANET_TOY, '--cfg-options', 'optim_wrapper.optimizer.lr=abc'])
    assert str(info.value) == ("--cfg-options: optim_wrapper.optimizer.lr='abc': optim_wrapper.optimizer.lr takes a "
                               "number (the config has 0.001), not the text 'abc'.")


def test_option_types_and_misplaced_sections():
    cfg = Config(dict(optim_wrapper=dict(optimizer=dict(lr=0.1)), model=dict(backbone=dict(out_norm=True)),
                      param_scheduler=[dict(end=3)]))
    check_cfg_options(cfg, {'optim_wrapper.optimizer.lr': 1, 'model.backbone.out_norm': False,
                            'param_scheduler.0.end': 5, 'load_from': 'x.pth', 'randomness.seed': 1})
    with pytest.raises(ToolInputError, match=r"the config has no 'optimizer' section; did you mean "
                                             r"optim_wrapper.optimizer.lr"):
        check_cfg_options(cfg, {'optimizer.lr': 'abc'})
    with pytest.raises(ToolInputError, match=r'out_norm takes a boolean \(true / false\)'):
        check_cfg_options(cfg, {'model.backbone.out_norm': 'no'})
    with pytest.raises(ToolInputError, match=r'param_scheduler.0.end takes a number'):
        check_cfg_options(cfg, {'param_scheduler.0.end': 'ten'})


@pytest.mark.parametrize('procs', ['0', '-1', 'two'])
def test_dist_train_with_no_processes(procs):
    proc = subprocess.run(['bash', str(ROOT / 'tools' / 'dist_train.sh'), RETINANET_TOY, procs],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"error: NUM_PROCS must be a whole number of processes, 1 or more (got "
                                   f"'{procs}'): bash tools/dist_train.sh CONFIG NUM_PROCS [train.py options...]")


class FakeResponse(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.headers = {'Content-Length': str(len(data))}

    def geturl(self) -> str:
        return 'http://example.invalid/x.pth'


def test_a_full_cache_during_a_download_names_the_cache_and_the_fix(tmp_path, monkeypatch):
    data = (ROOT / 'tests' / 'data' / 'fixtures' / 'inline_pvt_mini_authors_layout.pth').read_bytes()
    monkeypatch.setattr(download_module.urllib.request, 'urlopen', lambda *a, **k: FakeResponse(data))
    monkeypatch.setenv('INLINE_DENSE_CACHE', str(tmp_path / 'cache'))
    transfer = cache_module.transfer

    class FullFile:
        def __init__(self, f):
            self.f, self.written = f, 0

        def write(self, chunk):
            if self.written:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.written += len(chunk)
            return self.f.write(chunk)

        def flush(self):
            self.f.flush()

    def transfer_to_a_full_disk(url, out, hint, dest):
        return transfer(url, FullFile(out), hint, dest)
    monkeypatch.setattr(cache_module, 'transfer', transfer_to_a_full_disk)
    monkeypatch.setattr(download_module, 'CHUNK', 1 << 16)
    url = 'http://example.invalid/x.pth'
    with pytest.raises(DownloadError) as info:
        cache_module.fetch(url, None, True, 'Or put the file there by hand.', url)
    message = str(info.value)
    cache_dir = cache_module.checkpoint_cache()
    assert f'no space left on device in the checkpoint cache {cache_dir} after 65536 bytes' in message
    assert 'set INLINE_DENSE_CACHE to a directory on a disk with room' in message
    assert message.endswith('Or put the file there by hand.')
    assert sorted(p.name for p in cache_dir.iterdir() if not p.name.endswith('.lock')) == []


def test_a_damaged_safetensors_file(tmp_path):
    from safetensors.torch import save_file
    good = tmp_path / 'good.safetensors'
    save_file({'w': torch.ones(64)}, str(good))
    broken = tmp_path / 'broken.safetensors'
    broken.write_bytes(good.read_bytes()[:40])
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(str(broken))
    message = str(info.value)
    assert f"'{broken}' is not a readable PyTorch checkpoint: it is a damaged or incomplete .safetensors" in message
    assert 'download or save it again' in message
    assert '\n' not in message
