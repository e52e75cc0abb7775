"""The setup (inline_dense_dev/setup: env, mmcv_full, __main__) in-process: the settings read once from the
environment, the errors (one line each, with what to do), uv's command line and the compiled mmcv's
cache key. The shell entry is run too, for the cases that must end in one line, not a traceback."""
import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def setup_env():
    """The setup's settings, errors and uv (``inline_dense_dev.setup.env``)."""
    from inline_dense_dev.setup import env
    return env


@pytest.fixture
def setup_main():
    """The setup's entry (``python -m inline_dense_dev.setup``)."""
    return importlib.import_module('inline_dense_dev.setup.__main__')


@pytest.fixture
def mmcv_full():
    from inline_dense_dev.setup import mmcv_full
    return mmcv_full


def entry(tmp_path, *args, **env) -> subprocess.CompletedProcess:
    """``bash tools/setup_env.sh`` with a clean environment plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV', 'INLINE_DENSE_VENV', 'UV', 'STACK',
                                                             'MMCV', 'PYTHON')}
    base.update(INLINE_DENSE_CACHE=str(tmp_path / 'cache'), PYTHON=sys.executable, **env)
    return subprocess.run(['bash', str(ROOT / 'tools' / 'setup_env.sh'), *args], env=base, capture_output=True,
                          text=True, timeout=120)


def one_line_error(proc: subprocess.CompletedProcess, *needed: str) -> None:
    """Exit 1, no traceback, '[setup] ERROR: ...' then '[setup]   -> <what to do>' holding ``needed``."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr
    assert 'Traceback' not in proc.stderr, proc.stderr
    assert len(lines) == 2, lines
    assert lines[0].startswith('[setup] ERROR: '), lines
    assert lines[1].startswith('[setup]   -> '), lines
    for text in needed:
        assert text in proc.stderr, (text, proc.stderr)


def test_the_settings_are_read_once_with_their_defaults(setup_env, tmp_path):
    s = setup_env.Settings.from_env({'HOME': str(tmp_path)})
    assert (s.stack, s.flavour, s.venv, s.uv, s.ignored_venv) == ('openmmlab', 'lite', ROOT / '.venv', None, '')
    s = setup_env.Settings.from_env({'STACK': 'onedl', 'INLINE_DENSE_VENV': str(tmp_path / 'v'), 'MAX_JOBS': '3',
                                     'INLINE_DENSE_CACHE': str(tmp_path / 'c'), 'FORCE_CUDA': '0'})
    assert (s.stack, s.venv, s.max_jobs, s.cache, s.force_cuda) == ('onedl', tmp_path / 'v', 3, tmp_path / 'c', '0')
    assert s.python == tmp_path / 'v' / 'bin' / 'python'


@pytest.mark.parametrize(('env', 'message', 'hint'), [
    ({'STACK': 'mmlab'}, 'STACK=mmlab is not a stack', 'use STACK=openmmlab or STACK=onedl'),
    ({'MMCV': 'compiled'}, 'MMCV=compiled is not a flavour', 'use MMCV=lite'),
    ({'STACK': 'onedl', 'MMCV': 'full'}, 'not available with STACK=onedl', 'STACK=openmmlab MMCV=full'),
    ({'MAX_JOBS': 'many'}, 'MAX_JOBS=many is not a number', 'MAX_JOBS=1'),
])
def test_a_bad_setting_says_what_to_do(setup_env, env, message, hint):
    with pytest.raises(setup_env.SetupError, match=message) as err:
        setup_env.Settings.from_env(env)
    assert hint in err.value.hint


def test_uv_that_does_not_exist_or_cannot_run_is_one_line(tmp_path):
    """$UV missing, not executable, or a program that is not uv."""
    one_line_error(entry(tmp_path, UV='/nonexistent/uv'), 'UV=/nonexistent/uv is not an executable file', 'unset UV')
    plain = tmp_path / 'uv-not-executable'
    plain.write_text('#!/bin/sh\necho uv 0.0.0\n')
    one_line_error(entry(tmp_path, UV=str(plain)), 'is not an executable file', 'UV=$(command -v uv)')
    broken = tmp_path / 'uv-broken'
    broken.write_text('#!/bin/sh\nexit 3\n')
    broken.chmod(0o755)
    one_line_error(entry(tmp_path, UV=str(broken), INLINE_DENSE_VENV=str(tmp_path / 'v')), 'does not run',
                   'unset UV')
    assert not (tmp_path / 'v').exists()


def test_an_environment_that_is_a_file_or_a_foreign_folder_is_refused(tmp_path):
    """INLINE_DENSE_VENV naming a file; and a folder with other things in it."""
    a_file = tmp_path / 'venv.txt'
    a_file.write_text('notes')
    one_line_error(entry(tmp_path, '--plan', INLINE_DENSE_VENV=str(a_file)), 'is a file, not an environment folder',
                   'unset INLINE_DENSE_VENV to use .venv')
    foreign = tmp_path / 'photos'
    foreign.mkdir()
    (foreign / 'a.jpg').write_bytes(b'x')
    one_line_error(entry(tmp_path, INLINE_DENSE_VENV=str(foreign)), 'holds no virtual environment')
    assert sorted(p.name for p in foreign.iterdir()) == ['a.jpg']
    assert a_file.read_text() == 'notes'


def test_an_active_environment_elsewhere_is_named_and_ignored(setup_env, tmp_path):
    """A stale VIRTUAL_ENV (no such environment) is named, and .venv is set up."""
    stale = tmp_path / 'gone'
    proc = entry(tmp_path, '--plan', VIRTUAL_ENV=str(stale))
    assert proc.returncode == 0, proc.stderr
    out = dict(line.split(': ', 1) for line in proc.stdout.splitlines())
    assert out['environment'] == str(ROOT / '.venv')
    assert f'VIRTUAL_ENV={stale}, which names no environment (stale) is ignored' in out['note']
    assert not stale.exists()
    live = tmp_path / 'mine'
    live.mkdir()
    (live / 'pyvenv.cfg').write_text('home = /usr\n')
    note = setup_env.Settings.from_env({'VIRTUAL_ENV': str(live)}).note()
    assert note.startswith(f'note: VIRTUAL_ENV={live} is ignored')
    assert 'INLINE_DENSE_VENV' in note
    assert setup_env.Settings.from_env({'VIRTUAL_ENV': str(ROOT / '.venv')}).note() == ''  # the same one: no note


def test_uv_syncs_the_stack_extra_and_full_keeps_mmcv_lite_out(setup_env):
    args = setup_env.sync_args(setup_env.Settings.from_env({}))
    assert args[:3] == ['sync', '--locked', '-q']
    assert args[-2:] == ['--extra', 'lite']
    assert setup_env.sync_args(setup_env.Settings.from_env({'STACK': 'onedl'}))[-2:] == ['--extra', 'onedl']
    full = setup_env.sync_args(setup_env.Settings.from_env({'MMCV': 'full'}))
    assert full[-3:] == ['--no-install-package', 'mmcv-lite', '--inexact']
    project = tomllib.loads((ROOT / 'pyproject.toml').read_text(encoding='utf-8'))
    extras = project['project']['optional-dependencies']
    assert set(setup_env.STACKS.values()) <= set(extras)
    stacks = [{item['extra'] for item in group} for group in project['tool']['uv']['conflicts']]
    assert {'lite', 'full', 'onedl'} in stacks  # one stack per environment: the same import names


def test_a_failed_uv_step_names_its_cause(setup_env, tmp_path, capsys):
    fake = tmp_path / 'uv'
    fake.write_text('#!/bin/sh\necho "error: Failed to fetch: https://pypi.org/simple/torch/ dns error" >&2\nexit 2\n')
    fake.chmod(0o755)
    settings = setup_env.Settings.from_env({'INLINE_DENSE_VENV': str(tmp_path / 'v')})
    with pytest.raises(setup_env.SetupError, match='installing x failed') as err:
        setup_env.run_uv(fake, settings, 'installing x', 'sync')
    assert 'network access' in err.value.hint
    assert 'dns error' in capsys.readouterr().err
    fake.write_text('#!/bin/sh\necho "error: The lockfile at uv.lock needs to be updated" >&2\nexit 2\n')
    with pytest.raises(setup_env.SetupError) as err:
        setup_env.run_uv(fake, settings, 'installing x', 'sync')
    assert 'uv lock' in err.value.hint


def test_uv_comes_from_the_index_and_says_so_when_it_cannot(setup_env, tmp_path, monkeypatch):
    settings = setup_env.Settings.from_env({'INLINE_DENSE_CACHE': str(tmp_path)})
    monkeypatch.setattr(setup_env.sys, 'executable', str(tmp_path / 'no-python'))
    monkeypatch.setattr(setup_env.sys, 'base_prefix', str(tmp_path / 'no-prefix'))
    monkeypatch.setattr(setup_env.subprocess, 'run', lambda argv, **kw: subprocess.CompletedProcess(
        argv, 1, '', 'ERROR: Could not find a version that satisfies the requirement uv'))
    with pytest.raises(setup_env.SetupError, match=r'uv [\d.]+ could not be had from the package index') as err:
        setup_env.find_uv(settings)
    assert 'UV=/path/to/uv' in err.value.hint


def test_plan_and_options(setup_main, tmp_path, capsys):
    assert setup_main.main(['--plan'], {'INLINE_DENSE_VENV': str(tmp_path / 'v'), 'STACK': 'onedl'}) == 0
    out = dict(line.split(': ', 1) for line in capsys.readouterr().out.splitlines())
    assert out['stack'] == 'onedl (extra [onedl])'
    assert out['environment-now'] == 'made by uv'
    assert out['lock'] == str(ROOT / 'uv.lock')
    assert out['command'].startswith('uv sync --locked')
    assert not (tmp_path / 'v').exists()
    assert setup_main.main(['--plna']) == 2
    assert setup_main.main(['--check-first-time'], {'UV': '/nonexistent/uv'}) == 1  # one line, as the setup


def test_where_python_writes_no_bytecode_uv_compiles_it(setup_env, setup_main, tmp_path, capsys):
    """PYTHONDONTWRITEBYTECODE set (containers, CI): every process would compile every module again, so uv
    byte-compiles the environment; unset, Python caches at first import; UV_COMPILE_BYTECODE is uv's own."""
    plain = setup_env.Settings.from_env({})
    assert plain.compile_bytecode is False
    assert plain.bytecode() == ''
    assert '--compile-bytecode' not in setup_env.sync_args(plain)
    asked = setup_env.Settings.from_env({'PYTHONDONTWRITEBYTECODE': '1'})
    assert asked.compile_bytecode is True
    assert 'PYTHONDONTWRITEBYTECODE is set' in asked.bytecode()
    args = setup_env.sync_args(asked)
    assert args[:4] == ['sync', '--locked', '-q', '--compile-bytecode']
    assert args[-2:] == ['--extra', 'lite']
    assert setup_env.Settings.from_env({'PYTHONDONTWRITEBYTECODE': ''}).compile_bytecode is False  # Python's rule
    for value in ('0', '1'):
        left = setup_env.Settings.from_env({'PYTHONDONTWRITEBYTECODE': '1', 'UV_COMPILE_BYTECODE': value})
        assert left.compile_bytecode is None
        assert '--compile-bytecode' not in setup_env.sync_args(left)
    for env, said in [({}, 'cached by Python at first import'),
                      ({'PYTHONDONTWRITEBYTECODE': '1'}, 'compiled by uv (PYTHONDONTWRITEBYTECODE is set)'),
                      ({'UV_COMPILE_BYTECODE': '1'}, 'as UV_COMPILE_BYTECODE tells uv')]:
        assert setup_main.main(['--plan'], {'INLINE_DENSE_VENV': str(tmp_path / 'v'), **env}) == 0
        out = dict(line.split(': ', 1) for line in capsys.readouterr().out.splitlines())
        assert out['bytecode'] == said
        assert ('--compile-bytecode' in out['command']) is (env == {'PYTHONDONTWRITEBYTECODE': '1'})


def test_compiled_ops_target(mmcv_full, setup_env, monkeypatch):
    s = setup_env.Settings
    assert mmcv_full.compiled_ops_target(s(force_cuda='1'), '13.0', cuda_available=False) == 'cuda13.0'
    assert mmcv_full.compiled_ops_target(s(force_cuda='0'), '13.0', cuda_available=True) == 'cpu'
    monkeypatch.setattr(mmcv_full.shutil, 'which', lambda name: None)
    assert mmcv_full.compiled_ops_target(s(), '13.0', cuda_available=True) == 'cpu'  # no nvcc: no CUDA ops
    monkeypatch.setattr(mmcv_full.shutil, 'which', lambda name: f'/usr/bin/{name}')
    assert mmcv_full.compiled_ops_target(s(), '13.0', cuda_available=True) == 'cuda13.0'
    assert mmcv_full.compiled_ops_target(s(), None, cuda_available=False) == 'cpu'


def test_the_mmcv_wheel_key_follows_what_changes_the_build(mmcv_full, tmp_path, monkeypatch):
    key = mmcv_full.wheel_key('2.1', '2.9', '3.11', 'cpu')
    assert mmcv_full.wheel_key('2.1', '2.9', '3.11', 'cpu') == key
    for other in (('2.1', '2.8', '3.11', 'cpu'), ('2.1', '2.9', '3.12', 'cpu'), ('2.1', '2.9', '3.11', 'cuda13.0')):
        assert mmcv_full.wheel_key(*other) != key
    build = tmp_path / 'build.txt'
    build.write_text(mmcv_full.BUILD.read_text() + 'ninja==0\n')
    monkeypatch.setattr(mmcv_full, 'BUILD', build)
    assert mmcv_full.wheel_key('2.1', '2.9', '3.11', 'cpu') != key  # the build tools are part of it


def test_cached_wheels_of_two_keys_live_side_by_side(mmcv_full, tmp_path):
    built = tmp_path / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl'
    built.write_bytes(b'wheel')
    first = mmcv_full.store_wheel(built, tmp_path / 'cache' / 'key-a')
    mmcv_full.store_wheel(built, tmp_path / 'cache' / 'key-b')
    assert mmcv_full.cached_wheel(tmp_path / 'cache' / 'key-a') == first
    assert mmcv_full.cached_wheel(tmp_path / 'cache' / 'key-c') is None


def test_the_compiled_mmcv_source_is_locked_with_its_hash(mmcv_full):
    """MMCV=full builds the sdist uv.lock pins for mmcv at mmcv-lite's version, hash and all."""
    from inline_dense_dev import uvlock
    mmcv = uvlock.package('mmcv', version=uvlock.package('mmcv-lite').version)
    assert str(mmcv.sdist['url']).endswith(f'mmcv-{mmcv.version}.tar.gz')
    assert str(mmcv.sdist['hash']).startswith('sha256:')
    assert not mmcv.wheels
