"""tools/setup_env.py in-process: its one decision, its keys, its pins and its error messages.

``--plan`` prints the same :func:`decide` the setup acts on, so testing ``decide`` and what
:func:`observe` feeds it covers both.
"""
import dataclasses
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def setup_env(load_tool):
    return load_tool('setup_env')


@pytest.fixture
def inputs(setup_env, tmp_path, monkeypatch):
    """Copies of the setup's input files, swapped in for the real ones."""
    copies = {}
    for attr, path in (('LOCK', setup_env.LOCK), ('BUILD', setup_env.BUILD), ('CXX_PROBE', setup_env.CXX_PROBE)):
        copies[attr] = tmp_path / path.name
        shutil.copy(path, copies[attr])
        monkeypatch.setattr(setup_env, attr, copies[attr])
    return copies


def test_decide(setup_env):
    State, decide = setup_env.State, setup_env.decide
    assert decide(State('lite', stamp='s', env_stamp='s')).action == 'ready'
    assert decide(State('lite', stamp='s', env_stamp='s', force=True)).action == 'install'
    assert decide(State('lite', stamp=None, env_stamp='s')).action == 'install'
    assert decide(State('full', stamp='old', env_stamp='s')).action == 'compile-mmcv'
    assert decide(State('full', stamp='old', env_stamp='s', mmcv_wheel=Path('w.whl'))).action == 'cached-mmcv'
    assert decide(State('full', stamp='s', env_stamp='s', mmcv_wheel=None)).action == 'ready'


def test_the_environment_stamp_follows_the_pins_the_stack_and_the_flavour(setup_env, inputs, tmp_path):
    venv = tmp_path / '.venv'
    stack = dataclasses.replace(setup_env.STACKS['openmmlab'], lock=inputs['LOCK'])
    before = setup_env.env_stamp('lite', venv, stack)
    assert setup_env.env_stamp('lite', venv, stack) == before
    assert setup_env.env_stamp('full', venv, stack) != before
    assert setup_env.env_stamp('lite', tmp_path / 'other', stack) != before
    assert setup_env.env_stamp('lite', venv, setup_env.STACKS['onedl']) != before
    with open(inputs['LOCK'], 'a') as f:
        f.write('# a changed pin file\n')
    assert setup_env.env_stamp('lite', venv, stack) != before


def test_the_mmcv_wheel_key_follows_what_changes_the_build_only(setup_env, inputs):
    key = setup_env.mmcv_wheel_key('2.1.0', '2.14.1', '3.11', 'cpu')
    assert setup_env.mmcv_wheel_key('2.1.0', '2.14.1', '3.11', 'cpu') == key
    for other in (('2.1.0', '2.13.0', '3.11', 'cpu'), ('2.1.0', '2.14.1', '3.12', 'cpu'),
                  ('2.1.0', '2.14.1', '3.11', 'cuda13.0')):
        assert setup_env.mmcv_wheel_key(*other) != key
    # The setup script's own text is no input of the build (a comment edit compiles nothing) ...
    assert 'setup_env' not in key
    # ... the build tools and the C++ standard probe are.
    for name in ('BUILD', 'CXX_PROBE'):
        with open(inputs[name], 'a') as f:
            f.write('\n# changed\n')
        changed = setup_env.mmcv_wheel_key('2.1.0', '2.14.1', '3.11', 'cpu')
        assert changed != key
        key = changed


def test_compiled_ops_target(setup_env, monkeypatch):
    monkeypatch.setenv('FORCE_CUDA', '1')
    assert setup_env.compiled_ops_target('13.0', cuda_available=False) == 'cuda13.0'
    monkeypatch.setenv('FORCE_CUDA', '0')
    assert setup_env.compiled_ops_target('13.0', cuda_available=True) == 'cpu'
    monkeypatch.delenv('FORCE_CUDA')
    monkeypatch.setattr(setup_env.shutil, 'which', lambda name: None)
    assert setup_env.compiled_ops_target('13.0', cuda_available=True) == 'cpu'  # no nvcc: no CUDA ops
    monkeypatch.setattr(setup_env.shutil, 'which', lambda name: f'/usr/bin/{name}')
    assert setup_env.compiled_ops_target('13.0', cuda_available=True) == 'cuda13.0'
    assert setup_env.compiled_ops_target(None, cuda_available=False) == 'cpu'


def test_cached_wheels_of_two_keys_live_side_by_side(setup_env, tmp_path):
    built = tmp_path / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl'
    built.write_bytes(b'stand-in')
    first = setup_env.store_wheel(built, tmp_path / 'cache' / 'key-a')
    second = setup_env.store_wheel(built, tmp_path / 'cache' / 'key-b')
    assert first.exists() and second.exists()
    assert setup_env.cached_wheel(tmp_path / 'cache' / 'key-a') == first
    assert setup_env.cached_wheel(tmp_path / 'cache' / 'key-c') is None
    assert not list((tmp_path / 'cache' / 'key-a').glob('.partial'))


def test_plan_reads_the_machine_like_the_setup(setup_env, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv('VIRTUAL_ENV', str(tmp_path / 'venv'))  # not made yet
    monkeypatch.setenv('INLINE_DENSE_CACHE', str(tmp_path / 'cache'))
    monkeypatch.setenv('MMCV', 'full')
    assert setup_env.main(['--plan']) == 0
    out = dict(line.split(': ', 1) for line in capsys.readouterr().out.splitlines())
    assert out['plan'] == 'compile-mmcv' and out['mmcv'] == 'full (mmcv)'
    wheel_dir = Path(out['mmcv-wheels'])
    assert wheel_dir.parent == tmp_path / 'cache' / 'wheels'
    (wheel_dir / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl').parent.mkdir(parents=True)
    (wheel_dir / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl').write_bytes(b'stand-in')
    assert setup_env.main(['--plan']) == 0
    assert 'plan: cached-mmcv' in capsys.readouterr().out
    monkeypatch.setenv('MMCV', 'lite')
    assert setup_env.main(['--plan']) == 0
    assert 'plan: install' in capsys.readouterr().out


def test_bad_flavour_and_option_say_what_to_do(setup_env, monkeypatch, capsys):
    monkeypatch.setenv('MMCV', 'compiled')
    assert setup_env.main(['--plan']) == 1
    assert 'use MMCV=lite' in capsys.readouterr().err
    assert setup_env.main(['--plna']) == 2


def test_pins(setup_env, tmp_path):
    pins = setup_env.read_pins()
    for name in ('torch', 'torchvision', 'mmcv-lite', 'mmengine', 'mmdet', 'mmsegmentation', 'numpy', 'setuptools'):
        assert name in pins
    onedl = setup_env.read_pins(setup_env.STACKS['onedl'].lock)
    for name in ('onedl-mmengine', 'onedl-mmcv', 'onedl-mmdetection', 'onedl-mmsegmentation', 'imaug'):
        assert name in onedl
    assert not {'mmcv-lite', 'mmdet', 'mmengine'} & set(onedl)  # the frozen distributions would clash
    ranged = tmp_path / 'lock.txt'
    ranged.write_text('numpy>=1.2\n')
    with pytest.raises(setup_env.SetupError, match='not an exact pin'):
        setup_env.read_pins(ranged)
    marked = tmp_path / 'marked.txt'
    marked.write_text("scipy==1.17.1 ; python_full_version < '3.12' \\\n    --hash=sha256:ab\n"
                      "scipy==1.18.1 ; python_full_version >= '3.12' \\\n    --hash=sha256:cd\n")
    assert setup_env.read_pins(marked) == {'scipy': '1.17.1'}


def test_every_locked_package_carries_its_hashes(setup_env):
    for stack in setup_env.STACKS.values():
        lines = stack.lock.read_text(encoding='utf-8').splitlines()
        pins = [i for i, line in enumerate(lines) if setup_env.PIN_LINE.match(line)]
        assert len(pins) > 50
        for i in pins:
            assert lines[i].endswith('\\') and lines[i + 1].strip().startswith('--hash=sha256:'), (stack.name, lines[i])


def test_mmcv_full_installs_the_lock_without_mmcv_lite(setup_env, tmp_path):
    lock = setup_env.lock_without(setup_env.LOCK, ['mmcv-lite'], tmp_path / 'lock.txt')
    text = lock.read_text()
    assert 'mmcv-lite' not in text and 'mmdet==' in text
    assert len(setup_env.read_pins(lock)) == len(setup_env.read_pins()) - 1
    hashes = sum(line.strip().startswith('--hash') for line in text.splitlines())
    original = setup_env.LOCK.read_text().splitlines()
    start = next(i for i, line in enumerate(original) if line.startswith('mmcv-lite=='))
    own = next(i for i in range(start + 1, len(original)) if not original[i].startswith(' ')) - start - 1
    assert hashes == sum(line.strip().startswith('--hash') for line in original) - own  # its hash lines left too


def test_stack_and_flavour_errors_say_what_to_do(setup_env, monkeypatch, capsys):
    monkeypatch.setenv('STACK', 'mmlab')
    assert setup_env.main(['--plan']) == 1
    assert 'use STACK=openmmlab or STACK=onedl' in capsys.readouterr().err
    monkeypatch.setenv('STACK', 'onedl')
    monkeypatch.setenv('MMCV', 'full')
    assert setup_env.main(['--plan']) == 1
    assert 'STACK=openmmlab MMCV=full' in capsys.readouterr().err
    monkeypatch.setenv('MMCV', 'lite')
    assert setup_env.main(['--plan']) == 0
    out = dict(line.split(': ', 1) for line in capsys.readouterr().out.splitlines())
    assert out['stack'] == 'onedl' and out['mmcv'] == 'lite (onedl-mmcv)' and out['lock'].endswith('lock-onedl.txt')


def test_uv_comes_from_uv_or_the_index_and_says_so_when_it_cannot(setup_env, tmp_path, monkeypatch):
    monkeypatch.setenv('UV', '/opt/uv/bin/uv')
    assert setup_env.find_uv(tmp_path) == Path('/opt/uv/bin/uv')
    monkeypatch.delenv('UV')
    monkeypatch.setattr(setup_env.sys, 'executable', str(tmp_path / 'no-python'))
    monkeypatch.setattr(setup_env.sys, 'base_prefix', str(tmp_path / 'no-prefix'))
    monkeypatch.setattr(setup_env.subprocess, 'run', lambda argv, **kw: setup_env.subprocess.CompletedProcess(
        argv, 1, '', 'ERROR: Could not find a version that satisfies the requirement uv'))
    with pytest.raises(setup_env.SetupError, match=r'uv [\d.]+ could not be had from the package index') as err:
        setup_env.find_uv(tmp_path)
    assert any('UV=/path/to/uv' in hint for hint in err.value.hints)


@pytest.mark.parametrize('stack', ['openmmlab', 'onedl'])
def test_the_runtime_requirements_agree_with_the_pins(setup_env, stack):
    """setup.py's ranges (requirements/runtime.txt) admit every pinned version of both locks."""
    from packaging.requirements import Requirement
    pins = setup_env.read_pins(setup_env.STACKS[stack].lock)
    for line in (ROOT / 'requirements' / 'runtime.txt').read_text().splitlines():
        line = line.split('#')[0].strip()
        if line:
            req = Requirement(line)
            assert req.specifier.contains(pins[setup_env.normalise(req.name)], prereleases=True), line


def test_the_onedl_extra_names_the_locked_onedl_releases(setup_env):
    """``pip install "inline_dense[onedl]"`` asks for the onedl distributions (never mmdet, which pip
    would install over onedl-mmdetection), in ranges that admit what lock-onedl.txt pins."""
    import re

    from packaging.requirements import Requirement
    pins = setup_env.read_pins(setup_env.STACKS['onedl'].lock)
    text = (ROOT / 'setup.py').read_text(encoding='utf-8')
    extra = re.search(r"ONEDL = \[(.*?)\]\n", text, re.S).group(1)
    reqs = [Requirement(r) for r in re.findall(r"'([^']+)'", extra)]
    assert {r.name for r in reqs} >= {'onedl-mmengine', 'onedl-mmcv', 'onedl-mmdetection', 'onedl-mmsegmentation'}
    for req in reqs:
        assert req.specifier.contains(pins[setup_env.normalise(req.name)]), req


@pytest.mark.parametrize('output, cause', [
    ('Traceback (most recent call last):\n  ...\nModuleNotFoundError: No module named pkg_resources\n',
     'a Python error in a build step (not a network problem): ModuleNotFoundError: No module named pkg_resources'),
    ('ERROR: ResolutionImpossible: ...', 'the pinned versions conflict'),
    ('  x No solution found when resolving dependencies:', 'the pinned versions conflict'),
    ('error: Failed to fetch: `https://pypi.org/simple/torch/`\n  Caused by: dns error', 'could not be reached'),
    ('error: Hash mismatch for `torch==2.14.1`', 'does not match the hash in the lock'),
    ('error: Failed to build `onedl-mmcv==2.3.6`\n  ModuleNotFoundError: No module named torch',
     'a Python error in a build step (not a network problem): ModuleNotFoundError: No module named torch'),
    ('Max retries exceeded with url: /simple/torch/', 'the package index could not be reached'),
    ('ERROR: No matching distribution found for torch==9.9', 'the index has no matching release'),
    ('OSError: [Errno 28] No space left on device', 'the disk is full'),
    ('something else', 'failed'),
])
def test_pip_failures_name_their_cause(setup_env, output, cause, tmp_path):
    err = setup_env.explain_pip_failure('installing x', output, tmp_path / 'log')
    assert str(err).startswith('installing x') and cause in str(err)
    assert err.hints
