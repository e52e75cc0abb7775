"""tools/convert_checkpoint.py never destroys a file: atomic output, output = input
refused (any spelling, symlink, hard link), a full disk reported with the path and the old file
kept, a --backbone of another family refused, outputs in a missing directory or at a directory."""
import contextlib
import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import inline_dense.checkpoint.atomic as atomic
import inline_dense.checkpoint.saving as saving
from inline_dense.checkpoint import CheckpointError
from inline_dense.checkpoint.saving import DiskFullError, OutputPathError, save_atomically
from inline_dense.models.convert import convert_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / 'tests' / 'data' / 'fixtures'
SWIN = FIXTURES / 'inline_swin_mini_authors_layout.pth'


@pytest.fixture
def authors_copy(tmp_path):
    """A copy of the authors'-layout InLine-Swin file, and its bytes."""
    path = tmp_path / 'authors.pth'
    data = SWIN.read_bytes()
    path.write_bytes(data)
    return path, data


def leftovers(directory: Path):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith('.tmp-'))


@pytest.mark.parametrize('spelling', ['same', 'dotted', 'symlink', 'hardlink'])
def test_output_that_is_the_input_is_refused(authors_copy, tmp_path, spelling):
    src, data = authors_copy
    (tmp_path / 'sub').mkdir()
    dst = {'same': src, 'dotted': tmp_path / 'sub' / '..' / 'authors.pth', 'symlink': tmp_path / 'link.pth',
           'hardlink': tmp_path / 'hard.pth'}[spelling]
    if spelling == 'symlink':
        dst.symlink_to(src)
    elif spelling == 'hardlink':
        os.link(src, dst)
    with pytest.raises(OutputPathError, match='is the input file itself'):
        convert_file(str(src), str(dst))
    assert src.read_bytes() == data


def test_full_disk_names_the_path_and_keeps_the_old_file(authors_copy, tmp_path, monkeypatch):
    src, _ = authors_copy
    dst = tmp_path / 'backbone.pth'
    dst.write_bytes(b'the good file from before')

    def full(obj, f, *args, **kwargs):  # the disk fills after a first part is written
        f.write(b'x' * 100)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(saving.torch, 'save', full)
    with pytest.raises(DiskFullError) as info:
        convert_file(str(src), str(dst))
    assert 'no space left on device' in str(info.value)
    assert str(dst) in str(info.value)
    assert 'left unchanged' in str(info.value)
    assert dst.read_bytes() == b'the good file from before'
    assert leftovers(tmp_path) == []


def test_full_disk_inside_torchs_writer_is_still_reported_as_such(tmp_path, monkeypatch):
    """torch's zip writer turns a failed write into 'unexpected pos': the disk's error wins."""
    dst = tmp_path / 'c.pth'
    real_open = open

    class FullFile:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def opener(path, mode='r', *args, **kwargs):
        f = real_open(path, mode, *args, **kwargs)
        return FullFile(f) if 'w' in mode and '.tmp-' in str(path) else f
    monkeypatch.setattr('builtins.open', opener)
    with pytest.raises(DiskFullError, match=r'no space left on device while writing .*c.pth'):
        save_atomically({'w': torch.zeros(10000)}, dst)
    monkeypatch.undo()
    assert not dst.exists()
    assert leftovers(tmp_path) == []


def test_output_is_written_atomically(authors_copy, tmp_path, monkeypatch):
    src, _ = authors_copy
    dst = tmp_path / 'backbone.pth'
    dst.write_bytes(b'old')
    seen = []
    real_replace = os.replace

    def replace(a, b):
        seen.append((Path(a).name, Path(b).name, dst.read_bytes()))
        real_replace(a, b)
    monkeypatch.setattr(atomic.os, 'replace', replace)
    name, kept, _ = convert_file(str(src), str(dst))
    assert seen
    assert seen[0][0].startswith('.tmp-backbone.pth.')
    assert seen[0][1] == 'backbone.pth'
    assert seen[0][2] == b'old'  # the old file stays whole until the new one is complete
    assert name == 'InLineSwin'
    assert len(torch.load(dst, weights_only=True)['state_dict']) == kept


@pytest.mark.parametrize('wrong', ['InLinePVT', 'InLineCSwin'])
def test_backbone_of_another_family_is_refused(authors_copy, tmp_path, wrong):
    src, _ = authors_copy
    with pytest.raises(CheckpointError, match=f'holds InLineSwin weights .*not {wrong}.*--backbone InLineSwin'):
        convert_file(str(src), str(tmp_path / 'out.pth'), backbone=wrong)
    assert not (tmp_path / 'out.pth').exists()
    convert_file(str(src), str(tmp_path / 'out.pth'), backbone='InLineSwin')  # the right one passes


def test_pvt_and_cswin_files_are_recognised(tmp_path):
    for family, wrong in (('pvt', 'InLineSwin'), ('cswin', 'InLinePVT')):
        src = FIXTURES / f'inline_{family}_mini_authors_layout.pth'
        with pytest.raises(CheckpointError, match=f'not {wrong}'):
            convert_file(str(src), str(tmp_path / 'out.pth'), backbone=wrong)


@pytest.mark.parametrize('backbone', ['auto', 'InLineDeiT'])
def test_a_softmax_vit_is_refused_though_its_keys_look_like_deit(backbone, tmp_path):
    """A timm softmax ViT (DeiT-Ti) has InLine-DeiT's key layout but none of InLine attention's own
    weights: converting it wrote 'InLine-DeiT: wrote N tensors', a file that later failed to load."""
    import timm
    src = tmp_path / 'deit_tiny.pth'
    torch.save({'model': timm.create_model('deit_tiny_patch16_224', depth=2).state_dict()}, src)
    with pytest.raises(CheckpointError, match=r'holds no InLine attention weights \(no key like '
                                              r'blocks\.0\.attn\.residual\.0\.weight among its 32\)') as info:
        convert_file(str(src), str(tmp_path / 'out.pth'), backbone=backbone)
    assert len(str(info.value).splitlines()) == 1
    assert not (tmp_path / 'out.pth').exists()
    for family in ('deit', 'swin', 'pvt', 'cswin'):  # every family's InLine file still converts, and ours again
        convert_file(str(FIXTURES / f'inline_{family}_mini_authors_layout.pth'), str(tmp_path / f'{family}.pth'))
        convert_file(str(tmp_path / f'{family}.pth'), str(tmp_path / f'{family}_again.pth'))


def test_output_at_a_directory_or_in_a_missing_one(authors_copy, tmp_path):
    src, _ = authors_copy
    with pytest.raises(OutputPathError, match='is a directory; name a file in it'):
        convert_file(str(src), str(tmp_path))
    with pytest.raises(OutputPathError, match='which does not exist; create it first'):
        convert_file(str(src), str(tmp_path / 'missing' / 'out.pth'))


@pytest.mark.slow
def test_the_tool_says_it_in_one_line(authors_copy):
    src, data = authors_copy
    proc = subprocess.run([sys.executable, str(ROOT / 'tools' / 'convert_checkpoint.py'), str(src), str(src)],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', '')))
    assert proc.returncode == 1
    assert 'Traceback' not in proc.stderr
    assert proc.stderr.strip().startswith('error: the output')
    assert len(proc.stderr.strip().splitlines()) == 1
    assert src.read_bytes() == data


@pytest.mark.skipif(not os.path.exists('/dev/full'), reason='needs /dev/full (Linux)')
def test_a_real_enospc_is_recovered_from_torchs_writer():
    """/dev/full fails every write with ENOSPC, as a full disk does: torch reports 'unexpected pos'
    and the watched writer keeps the disk's error."""
    f = open('/dev/full', 'wb')  # noqa: SIM115 (the close below fails with ENOSPC too: suppressed, not raised)
    try:
        watched = saving._WatchedWriter(f)
        with pytest.raises(RuntimeError, match='unexpected pos'):
            torch.save({'w': torch.zeros(100_000)}, watched)
    finally:
        with contextlib.suppress(OSError):  # closing flushes what is left: ENOSPC again
            f.close()
    assert watched.error is not None
    assert watched.error.errno == errno.ENOSPC


def test_a_directory_as_the_source_is_named_as_such(tmp_path):
    """It said 'does not exist', with init_cfg advice."""
    (tmp_path / 'run').mkdir()
    (tmp_path / 'run' / 'iter_400.pth').write_bytes(b'')
    with pytest.raises(CheckpointError, match='is a directory, not a file; pass a checkpoint file in it') as info:
        convert_file(str(tmp_path / 'run'), str(tmp_path / 'out.pth'))
    assert 'iter_400.pth' in str(info.value)
    assert 'does not exist' not in str(info.value)
