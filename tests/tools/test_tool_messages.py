"""Tools and module entry points answer input errors in one line, and take the spellings their
ecosystem's users type: the scaling figure's worker asked for --help, the deformable-attention
benchmark given a missing --before file, make_toy_data with no images, get_flops in mmdet's
``CONFIG --shape H W``."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import import_tool

ROOT = Path(__file__).resolve().parents[2]
RETINANET_TOY = str(ROOT / 'configs' / 'toy' / 'retinanet_inline-pvt-mini_fpn_toy-coco.py')


def run_module(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


@pytest.mark.parametrize(('argv', 'code'), [(['--help'], 0), (['-h'], 0), (['not-json'], 1), ([], 1),
                                            (['[1, 2]'], 1)])
def test_the_scaling_worker_answers_in_one_line(argv, code, capsys):
    from inline_dense.analysis import scaling
    with pytest.raises(SystemExit) as info:
        scaling.main(argv)
    if code == 0:
        assert info.value.code in (0, None)
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1
        assert out[0].startswith('usage: python -m inline_dense.analysis.scaling JOB_JSON')
        assert 'tools/benchmark.py --scaling' in out[0]
    else:
        message = str(info.value.code)
        assert len(message.splitlines()) == 1
        assert 'is not a job as JSON; usage: ' in message


def test_the_scaling_worker_help_from_the_command_line():
    proc = run_module('-m', 'inline_dense.analysis.scaling', '--help')
    assert proc.returncode == 0
    assert 'Traceback' not in proc.stderr
    assert proc.stdout.startswith('usage: python -m inline_dense.analysis.scaling JOB_JSON')


def test_deform_attn_refuses_a_missing_before_file_before_measuring(tmp_path, monkeypatch, capsys):
    from inline_dense.analysis import deform_attn
    monkeypatch.setattr(deform_attn, 'measure_in_subprocess', lambda *a, **k: pytest.fail('measured'))
    with pytest.raises(SystemExit) as info:
        deform_attn.main(['--before', str(tmp_path / 'ext_main.py')])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f'--before {tmp_path / "ext_main.py"}: no such file; give a copy of an '
                            f'inline_dense/ops/ext.py, e.g. git show main:inline_dense/ops/ext.py > /tmp/ext_main.py')


@pytest.mark.parametrize(('argv', 'message'), [
    (['--num-train', '0'], '--num-train 0: give 1 or more'),
    (['--num-val', '-2'], '--num-val -2: give 1 or more'),
    (['--image-size', '0'], '--image-size 0: give 1 or more'),
    (['--image-size', '6'], 'toy COCO: object_size'),  # the generator's own check, in one line
])
def test_make_toy_data_refuses_settings_in_one_line(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        import_tool('make_toy_data').main(['coco', '--root', str(tmp_path / 'toy'), *argv])
    assert info.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    assert not (tmp_path / 'toy').exists()


def test_get_flops_takes_mmdets_config_and_shape(tmp_path, capsys):
    tool = import_tool('get_flops')
    args = tool.parse_args([RETINANET_TOY, '--shape', '64', '96'])
    assert (args.config, args.shapes, args.models) == ([RETINANET_TOY], [(64, 96)], [])
    assert tool.parse_args([RETINANET_TOY, '--shape', '80']).shapes == [(80, 80)]  # one side: a square, as mmdet
    assert tool.parse_args(['--config', RETINANET_TOY]).shapes == [(224, 224), (800, 1216)]
    tool.main([RETINANET_TOY, '--shape', '64', '96', '--json', str(tmp_path / 'f.json')])
    assert 'retinanet_inline-pvt-mini_fpn_toy-coco   64x96' in capsys.readouterr().out
    for argv in (['--shape', '64', '96', '3'], ['--shape', '0'], ['--shape', '64', '--shapes', '64x64']):
        with pytest.raises(SystemExit):
            tool.parse_args([RETINANET_TOY, *argv])
        said = capsys.readouterr().err.strip().splitlines()[-1].split(': error: ')[-1]
        assert said.startswith(('--shape', 'give --shape'))
