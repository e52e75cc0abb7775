"""One rule for every output path (inline_dense/checkpoint/atomic.py): an existing path that is not
a regular file (a device, a directory, a FIFO) is refused in one line; a symlink is written through
to its target, atomically, and stays a link. Checked on the rule itself and on every writing tool:
the converter, export_onnx, the benchmark's JSON and plot, get_flops' JSON, tools/test.py's --out
and --show-dir and the demo picture."""
import os
from pathlib import Path

import pytest

from helpers import import_tool
from inline_dense.checkpoint.atomic import OutputPathError, output_target, write_output
from inline_dense.models.convert import convert_file

ROOT = Path(__file__).resolve().parents[2]
SWIN = ROOT / 'tests' / 'data' / 'fixtures' / 'inline_swin_mini_authors_layout.pth'
SEG_CONFIG = str(ROOT / 'configs' / 'toy' / 'upernet_inline-swin-mini_toy-ade.py')


def special(kind: str, tmp_path: Path) -> Path:
    """An existing output path that is not a regular file."""
    if kind == 'device':
        if not os.path.exists('/dev/null'):
            pytest.skip('needs /dev/null')
        return Path('/dev/null')
    path = tmp_path / f'out_{kind}'
    if kind == 'directory':
        path.mkdir()
    elif kind == 'fifo':
        os.mkfifo(path)
    elif kind == 'link-to-fifo':
        os.mkfifo(tmp_path / 'fifo')
        path.symlink_to(tmp_path / 'fifo')
    return path


KINDS = ['device', 'directory', 'fifo', 'link-to-fifo']
WORDS = {'device': 'character device', 'directory': 'is a directory', 'fifo': 'FIFO', 'link-to-fifo': 'FIFO'}


def unchanged(path: Path, kind: str) -> bool:
    if kind == 'device':
        return path.is_char_device()
    return path.is_dir() if kind == 'directory' else path.is_fifo()


@pytest.mark.parametrize('kind', KINDS)
def test_the_rule_refuses_what_is_not_a_regular_file(kind, tmp_path):
    path = special(kind, tmp_path)
    with pytest.raises(OutputPathError, match=WORDS[kind]) as info:
        write_output(path, b'data')
    assert len(str(info.value).splitlines()) == 1
    assert str(path) in str(info.value)
    assert unchanged(path, kind)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith('.tmp-')]


@pytest.mark.parametrize('chain', [1, 2])
def test_a_symlink_is_written_through_and_kept(chain, tmp_path):
    target = tmp_path / 'real' / 'out.json'
    target.parent.mkdir()
    target.write_text('old')
    link = target
    for i in range(chain):  # link -> (link ->) target, relative and absolute
        nxt = tmp_path / f'link{i}.json'
        nxt.symlink_to(os.path.relpath(link, tmp_path) if i == 0 else link)
        link = nxt
    write_output(link, 'new')
    assert link.is_symlink()
    assert target.read_text() == 'new'
    assert link.read_text() == 'new'
    assert not [p for p in target.parent.iterdir() if p.name.startswith('.tmp-')]


def test_a_dangling_symlink_creates_its_target(tmp_path):
    link = tmp_path / 'link.json'
    link.symlink_to(tmp_path / 'later.json')
    write_output(link, 'x')
    assert link.is_symlink()
    assert (tmp_path / 'later.json').read_text() == 'x'


def test_a_symlink_loop_is_refused(tmp_path):
    (tmp_path / 'a').symlink_to(tmp_path / 'b')
    (tmp_path / 'b').symlink_to(tmp_path / 'a')
    with pytest.raises(OutputPathError, match='cannot be inspected'):
        output_target(tmp_path / 'a')


@pytest.mark.parametrize('kind', KINDS)
def test_the_converter_refuses_them(kind, tmp_path):
    path = special(kind, tmp_path)
    with pytest.raises(OutputPathError, match=WORDS[kind]):
        convert_file(str(SWIN), str(path))
    assert unchanged(path, kind)


def test_the_converter_writes_through_a_link(tmp_path):
    target = tmp_path / 'backbone.pth'
    target.write_bytes(b'old')
    link = tmp_path / 'latest.pth'
    link.symlink_to(target)
    convert_file(str(SWIN), str(link))
    assert link.is_symlink()
    assert target.read_bytes()[:2] == b'PK'  # torch.save's zip


@pytest.mark.parametrize('kind', KINDS)
def test_export_onnx_refuses_them_before_exporting(kind, tmp_path, capsys):
    path = special(kind, tmp_path)
    with pytest.raises(SystemExit) as info:
        import_tool('export_onnx').parse_args([SEG_CONFIG, '--out', str(path)])
    assert info.value.code == 2
    assert WORDS[kind] in capsys.readouterr().err
    assert unchanged(path, kind)


@pytest.mark.parametrize('kind', KINDS)
def test_test_tool_refuses_them_before_testing(kind, tmp_path, capsys):
    """tools/test.py's --out (mmengine dumps the predictions there after the whole test set)."""
    path = special(kind, tmp_path)
    pkl = tmp_path / 'preds.pkl'  # --out must name a .pkl: a link with that name to the special file
    pkl.symlink_to(path)
    with pytest.raises(SystemExit) as info:
        import_tool('test').parse_args([SEG_CONFIG, 'ckpt.pth', '--out', str(pkl)])
    assert info.value.code == 2
    assert WORDS[kind] in capsys.readouterr().err
    assert unchanged(path, kind)


def test_test_tool_refuses_a_show_dir_that_is_a_file(tmp_path, capsys):
    path = tmp_path / 'pictures'
    path.write_text('keep')
    with pytest.raises(SystemExit) as info:
        import_tool('test').parse_args([SEG_CONFIG, 'ckpt.pth', '--show-dir', str(path)])
    assert info.value.code == 2
    assert 'is not a directory' in capsys.readouterr().err
    assert path.read_text() == 'keep'


@pytest.mark.parametrize('flag', ['--out', '--plot'])
@pytest.mark.parametrize('kind', ['device', 'fifo'])
def test_benchmark_refuses_them_before_measuring(flag, kind, tmp_path, capsys):
    path = special(kind, tmp_path)
    with pytest.raises(SystemExit) as info:
        import_tool('benchmark').parse_args(['--models', 'inline-swin-t', flag, str(path)])
    assert info.value.code == 2
    assert WORDS[kind] in capsys.readouterr().err


def test_get_flops_refuses_them(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        import_tool('get_flops').parse_args(['--models', 'inline-swin-t', '--json', str(tmp_path)])
    assert info.value.code == 2
    assert 'is a directory' in capsys.readouterr().err


def test_the_benchmark_plot_writes_through_a_link(tmp_path):
    from inline_dense.analysis.plot import plot
    target = tmp_path / 'sweep.png'
    target.write_bytes(b'old')
    link = tmp_path / 'latest.png'
    link.symlink_to(target)
    rows = [dict(model='inline-swin-t', mode='infer', pixels=p, height=h, width=h, median_ms=p / 1e3, peak_mib=p / 1e4)
            for h, p in ((224, 224 * 224), (448, 448 * 448))]
    plot(rows, str(link), 'test')
    assert link.is_symlink()
    assert target.read_bytes()[:4] == b'\x89PNG'
    with pytest.raises(OutputPathError, match='is a directory'):
        plot(rows, str(tmp_path), 'test')


def test_the_demo_refuses_a_picture_path_before_training(tmp_path, monkeypatch):
    demo = import_tool('demo_toy')
    os.mkfifo(tmp_path / 'predictions.png')
    trained = []
    monkeypatch.setattr(demo, 'build_runner', lambda cfg: trained.append(cfg))
    with pytest.raises(OutputPathError, match='FIFO'):
        demo.main(['--work-dir', str(tmp_path), '--max-iters', '1'])
    assert not trained
    assert (tmp_path / 'predictions.png').is_fifo()


@pytest.mark.parametrize('kind', ['device', 'fifo'])
def test_the_smp_toy_leaves_a_root_that_is_not_a_toy_folder_alone(kind, tmp_path):
    path = special(kind, tmp_path)
    with pytest.raises(SystemExit, match=r'^error: .* exists but was not made by the toy data generator'):
        import_tool('train_smp_toy').main(['--root', str(path), '--seconds', '1'])
    assert unchanged(path, kind)
