"""Which Pythons the setup takes, where its environment goes (INLINE_DENSE_VENV), and that the
setup, setup.py, the lock and the 3.13 CI step say the same about both."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def setup_env(load_tool):
    return load_tool('setup_env')


def supported_names(setup_env) -> list:
    return ['%d.%d' % v for v in setup_env.SUPPORTED_PYTHONS]


def test_python_3_13_is_taken_and_3_9_3_10_are_refused_before_pip(setup_env):
    for version in ((3, 11), (3, 12), (3, 13)):
        setup_env.check_python(version)
    for version in ((3, 9), (3, 10), (3, 14)):
        with pytest.raises(setup_env.SetupError, match=rf'Python {version[0]}\.{version[1]} is not supported') as err:
            setup_env.check_python(version)
        assert '3.11, 3.12, 3.13' in str(err.value)
        assert any('PYTHON=python3.13' in hint for hint in err.value.hints)


def test_mmcv_full_is_refused_on_3_13_with_the_cause_and_the_way_out(setup_env):
    """mmcv 2.1.0's sdist fails on 3.13 while pip prepares it (KeyError: '__version__')."""
    for version in ((3, 11), (3, 12)):
        setup_env.check_python(version, 'full')
    setup_env.check_python((3, 13), 'lite')
    with pytest.raises(setup_env.SetupError, match=r'MMCV=full does not build on Python 3\.13.*PEP 667') as err:
        setup_env.check_python((3, 13), 'full')
    assert any('MMCV=lite' in hint and 'PYTHON=python3.12' in hint for hint in err.value.hints)


def test_setup_py_admits_every_supported_python_and_no_newer_one(setup_env):
    text = (ROOT / 'setup.py').read_text(encoding='utf-8')
    spec = SpecifierSet(re.search(r"python_requires='([^']+)'", text).group(1))
    for name in supported_names(setup_env):
        assert spec.contains(f'{name}.0'), name
    newest = setup_env.SUPPORTED_PYTHONS[-1]
    assert not spec.contains('%d.%d.0' % (newest[0], newest[1] + 1))


def test_the_help_the_shell_entry_and_the_lock_name_the_supported_pythons(setup_env, capsys):
    assert setup_env.main(['--help']) == 0
    help_text = capsys.readouterr().out
    assert '3.11, 3.12 or 3.13' in help_text and 'INLINE_DENSE_VENV' in help_text
    shell = (ROOT / 'tools' / 'setup_env.sh').read_text(encoding='utf-8')
    first, last = supported_names(setup_env)[0], supported_names(setup_env)[-1]
    assert f'Python {first}-{last}' in shell and f'python{last}' in shell
    for stack in setup_env.STACKS.values():
        lock_head = ' '.join(line.lstrip('# ') for line in stack.lock.read_text(encoding='utf-8').splitlines()
                             if line.startswith('#'))
        assert f'Python {", ".join(supported_names(setup_env)[:-1])} and {last}' in lock_head, stack.name
    # ... and the locks are resolved from the oldest of them up (uv pip compile --universal)
    args = setup_env.compile_args(setup_env.STACKS['onedl'], Path('out.txt'))
    assert args[args.index('--python-version') + 1] == first and '--universal' in args


def test_both_locks_pin_the_development_and_test_packages(setup_env):
    for stack in setup_env.STACKS.values():
        pins = setup_env.read_pins(stack.lock)
        for name in ('timm', 'segmentation-models-pytorch', 'ruff', 'mypy', 'pytest', 'pip', 'torch'):
            assert name in pins, (stack.name, name)
        assert pins['transformers'].startswith('5.'), stack.name  # a test-only package, 5.x
        assert pins['torch'] == setup_env.read_pins(setup_env.LOCK)['torch']  # one torch for both stacks


def test_inline_dense_venv_wins_over_the_active_environment(setup_env, tmp_path, monkeypatch):
    monkeypatch.delenv('INLINE_DENSE_VENV', raising=False)
    monkeypatch.delenv('VIRTUAL_ENV', raising=False)
    assert setup_env.chosen_venv() == ROOT / '.venv'
    assert setup_env.owned_by_setup(ROOT / '.venv')
    monkeypatch.setenv('VIRTUAL_ENV', str(tmp_path / 'active'))
    assert setup_env.chosen_venv() == tmp_path / 'active'
    assert not setup_env.owned_by_setup(tmp_path / 'active')  # a user's environment: warn, never delete
    monkeypatch.setenv('INLINE_DENSE_VENV', str(tmp_path / 'py313'))
    assert setup_env.chosen_venv() == tmp_path / 'py313'
    assert setup_env.owned_by_setup(tmp_path / 'py313')


def run_entry(tmp_path, **env) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV', 'INLINE_DENSE_VENV', 'PYTHON')}
    base.update(INLINE_DENSE_CACHE=str(tmp_path / 'cache'), MMCV='lite', **env)
    return subprocess.run(['bash', str(ROOT / 'tools' / 'setup_env.sh'), '--plan'], env=base,
                          capture_output=True, text=True, timeout=60)


def test_the_shell_entry_plans_for_inline_dense_venv_with_python(tmp_path):
    """A missing INLINE_DENSE_VENV is made by $PYTHON; --plan says where, and creates nothing."""
    venv = tmp_path / 'venv-other'
    proc = run_entry(tmp_path, INLINE_DENSE_VENV=str(venv), PYTHON=sys.executable)
    assert proc.returncode == 0, proc.stderr
    out = dict(line.split(': ', 1) for line in proc.stdout.splitlines())
    assert out['environment'] == str(venv) and out['plan'] == 'install'
    assert out['python'] == '%d.%d.%d' % sys.version_info[:3]
    assert not venv.exists()


def test_the_shell_entry_names_the_pythons_when_none_is_found(tmp_path):
    proc = run_entry(tmp_path, INLINE_DENSE_VENV=str(tmp_path / 'v'), PYTHON=str(tmp_path / 'no-python3.13'))
    assert proc.returncode == 1
    assert 'no Python interpreter' in proc.stderr and 'Python 3.11-3.13' in proc.stderr


def test_the_ci_step_sets_up_python_3_13_like_ci_step_one():
    """.ci/py313.sh: an empty pip cache and setup cache, no compiler, its own environment, and the
    fidelity, ops and toy end-to-end tests."""
    step = (ROOT / '.ci' / 'py313.sh').read_text(encoding='utf-8')
    for needed in ('INLINE_DENSE_VENV=', 'PIP_CACHE_DIR="$scratch/pip-cache"', 'INLINE_DENSE_CACHE="$scratch/cache"',
                   'no-compiler', 'sys.version_info[:2] == (3, 13)', 'tests/families/test_fidelity.py',
                   'tests/ops/test_mmcv_ops.py', 'tests/openmmlab/test_toy_e2e.py'):
        assert needed in step, needed
    assert subprocess.run(['bash', '-n', str(ROOT / '.ci' / 'py313.sh')]).returncode == 0


def test_the_ci_runs_the_whole_suite_on_the_other_stack_from_nothing():
    """.ci/other_stack.sh: STACK=onedl into its own environment with empty uv, pip and setup caches and
    no compiler, then every test (no -m filter: the slow ones too); .ci/run calls it."""
    step = (ROOT / '.ci' / 'other_stack.sh').read_text(encoding='utf-8')
    for needed in ('STACK="$stack"', 'INLINE_DENSE_VENV="$venv"', 'UV_CACHE_DIR="$scratch/uv-cache"',
                   'PIP_CACHE_DIR="$scratch/pip-cache"', 'INLINE_DENSE_CACHE="$scratch/cache"', 'no-compiler',
                   '-m pytest -q -n auto --maxschedchunk 1 tests', '${OTHER_STACK:-onedl}'):
        assert needed in step, needed
    assert ' -m "not slow"' not in step and "-m 'not slow'" not in step
    assert 'bash .ci/other_stack.sh' in (ROOT / '.ci' / 'run').read_text(encoding='utf-8')
    assert 'UV_CACHE_DIR="$scratch/uv-cache"' in (ROOT / '.ci' / 'py313.sh').read_text(encoding='utf-8')
    assert subprocess.run(['bash', '-n', str(ROOT / '.ci' / 'other_stack.sh')]).returncode == 0
