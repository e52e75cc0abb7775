"""Which Pythons the setup takes (pyproject.toml's requires-python), where its environment goes
(INLINE_DENSE_VENV), and that the setup, pyproject.toml, uv.lock and the CI steps say the same."""
import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def setup_env():
    """The setup's settings and errors (``inline_dense_dev.setup.env``)."""
    from inline_dense_dev.setup import env
    return env


def supported_names(setup_env) -> list:
    low, high = setup_env.supported_pythons()
    return [f'{low[0]}.{minor}' for minor in range(low[1], high[1])]


def test_the_pythons_come_from_requires_python(setup_env):
    spec = SpecifierSet(tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['requires-python'])
    names = supported_names(setup_env)
    assert names == ['3.11', '3.12', '3.13']
    for name in names:
        assert spec.contains(f'{name}.0')
        setup_env.check_python(tuple(map(int, name.split('.'))))
    for version in ((3, 9), (3, 10), (3, 14)):
        assert not spec.contains(f'{version[0]}.{version[1]}.0')
        with pytest.raises(setup_env.SetupError, match=rf'Python {version[0]}\.{version[1]} is not supported') as err:
            setup_env.check_python(version)
        assert '3.11, 3.12, 3.13' in str(err.value)
        assert 'PYTHON=python3.13' in err.value.hint


def test_mmcv_full_is_refused_on_3_13_with_the_cause_and_the_way_out():
    from inline_dense_dev.setup import mmcv_full
    for version in ((3, 11), (3, 12)):
        mmcv_full.check_python(version)
    with pytest.raises(mmcv_full.SetupError, match=r'MMCV=full does not build on Python 3\.13.*PEP 667') as err:
        mmcv_full.check_python((3, 13))
    assert 'MMCV=lite' in err.value.hint
    assert 'PYTHON=python3.12' in err.value.hint


def test_the_help_the_shell_entry_and_the_classifiers_name_the_supported_pythons(setup_env, capsys):
    from inline_dense_dev.setup.__main__ import main
    assert main(['--help']) == 0
    help_text = capsys.readouterr().out
    names = supported_names(setup_env)
    assert f'{", ".join(names[:-1])} or {names[-1]}' in help_text
    assert 'INLINE_DENSE_VENV' in help_text
    shell = (ROOT / 'tools' / 'setup_env.sh').read_text(encoding='utf-8')
    assert f'Python {names[0]}-{names[-1]}' in shell
    assert f'python{names[-1]}' in shell
    classifiers = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['classifiers']
    assert [c.rsplit(' ', 1)[1] for c in classifiers if c.startswith('Programming Language :: Python :: 3.')] == names


def test_the_lock_pins_one_torch_and_the_development_packages_for_both_stacks():
    from inline_dense_dev import uvlock
    packages = uvlock.read()
    for name in ('torch', 'torchvision', 'timm', 'segmentation-models-pytorch', 'ruff', 'mypy', 'pytest', 'pip',
                 'mmcv-lite', 'mmdet', 'onedl-mmcv', 'onedl-mmdetection', 'imaug'):
        assert len(packages[name]) == 1, name  # one version: the same torch on both stacks
    assert uvlock.package('transformers').version.startswith('5.')  # a test-only package, 5.x
    for versions in packages.values():
        for p in versions:  # every file carries its hash (uv checks them), this project aside
            files = [*p.wheels, *([p.sdist] if p.sdist else [])]
            assert p.name == 'inline-dense' or (files and all(str(f['hash']).startswith('sha256:') for f in files))


def test_the_version_is_pyprojects(setup_env):
    import inline_dense
    version = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['version']
    assert inline_dense.__version__ == version
    assert f'## [{version}]' in (ROOT / 'CHANGELOG.md').read_text(encoding='utf-8')


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
    assert out['environment'] == str(venv)
    assert out['environment-now'] == 'made by uv'
    assert out['python'] == '.'.join(map(str, sys.version_info[:3]))
    assert not venv.exists()


def test_the_shell_entry_names_the_pythons_when_none_is_found(tmp_path):
    proc = run_entry(tmp_path, INLINE_DENSE_VENV=str(tmp_path / 'v'), PYTHON=str(tmp_path / 'no-python3.13'))
    assert proc.returncode == 1
    assert 'no Python interpreter' in proc.stderr
    assert 'Python 3.11-3.13' in proc.stderr


def test_the_ci_steps_set_up_from_nothing_without_a_compiler_in_scratch_environments():
    """.ci/run, .ci/py313.sh and .ci/other_stack.sh: each sets up into its own scratch environment
    with empty uv, pip and setup caches and failing compilers first on PATH; .ci/run never touches
    the checkout's .venv; the newest Python's step also runs the fidelity, ops and toy tests and the
    core at the lock's torch; the other stack first checks that both environments share every
    distribution outside the stack, then runs the quick tests it can change and the runs marked stack."""
    ci = ROOT / '.ci'
    lib = (ci / 'lib.sh').read_text(encoding='utf-8')
    assert "trap 'rm -rf \"$scratch\"' EXIT" in lib
    assert 'exit 1' in lib
    for name in ('run', 'py313.sh', 'other_stack.sh'):
        step = (ci / name).read_text(encoding='utf-8')
        for needed in ('source .ci/lib.sh', 'INLINE_DENSE_CACHE="$scratch/cache"', 'UV_CACHE_DIR="$scratch/uv-cache"',
                       'PIP_CACHE_DIR="$scratch/pip-cache"', 'PATH="$no_compiler:$PATH"', 'bash tools/setup_env.sh'):
            assert needed in step, (name, needed)
        assert 'rm -rf .venv' not in step, name
        assert '.venv/bin' not in step, name
        assert subprocess.run(['bash', '-n', str(ci / name)]).returncode == 0
    run = (ci / 'run').read_text(encoding='utf-8')
    assert 'export INLINE_DENSE_VENV="$scratch/venv"' in run
    for needed in ('bash .ci/core_only.sh floor', 'bash .ci/py313.sh', 'bash .ci/other_stack.sh',
                   'tools/gpu_check.py --prepare "$INLINE_DENSE_GPU_WHEELS"',
                   '-m pytest -q tests/tools/test_gpu_wheels.py'):
        assert needed in run, needed
    py313 = (ci / 'py313.sh').read_text(encoding='utf-8')
    for needed in ('tests/families/test_fidelity.py', 'tests/ops/test_mmcv_ops.py', 'tests/openmmlab/test_toy_e2e.py',
                   'bash .ci/core_only.sh newest'):
        assert needed in py313, needed
    other = (ci / 'other_stack.sh').read_text(encoding='utf-8')
    assert 'python3 .ci/shared_versions.py "$default_python" "$venv/bin/python"' in other
    assert "-m pytest -q -n auto --maxschedchunk 1 -m '(not slow or stack) and not core'" in other
    assert '${OTHER_STACK:-onedl}' in other


def load_shared_versions():
    spec = importlib.util.spec_from_file_location('shared_versions', ROOT / '.ci' / 'shared_versions.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_stacks_share_what_pyproject_names_outside_the_stack():
    shared = load_shared_versions()
    pyproject = tomllib.loads((ROOT / 'pyproject.toml').read_text(encoding='utf-8'))
    names = shared.outside_the_stack(pyproject)
    assert {'torch', 'numpy', 'timm', 'segmentation-models-pytorch', 'torchvision', 'transformers', 'onnx',
            'pytest'} <= names
    assert not names & {'mmengine', 'mmdet', 'mmsegmentation', 'mmcv-lite', 'onedl-mmdetection', 'inline-dense'}


@pytest.mark.parametrize(('other', 'complaint'), [
    ({'torch': '2.14.1', 'onedl-mmdetection': '3.5.1'}, None),  # each stack has its own distributions
    ({'torch': '2.13.0', 'onedl-mmdetection': '3.5.1'}, 'torch: 2.14.1 in a, 2.13.0 in b'),
    ({'onedl-mmdetection': '3.5.1'}, 'torch: installed in a only'),
])
def test_the_shared_versions_check_names_each_difference(monkeypatch, capsys, other, complaint):
    shared = load_shared_versions()
    envs = {'a': {'torch': '2.14.1', 'mmdet': '3.3.0'}, 'b': other}
    monkeypatch.setattr(shared, 'installed', envs.__getitem__)
    monkeypatch.setattr(sys, 'argv', ['shared_versions.py', 'a', 'b'])
    code = shared.main()
    out = capsys.readouterr().out
    if complaint is None:
        assert code == 0, out
        assert out.startswith('[shared-versions] ok'), out
    else:
        assert code == 1, out
        assert complaint in out, out


def test_the_ci_finds_the_pythons_pyproject_admits():
    code = 'source .ci/lib.sh; echo "$(python_floor) $(python_newest)"; find_python "$(python_floor)"'
    proc = subprocess.run(['bash', '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    floor_newest, found = proc.stdout.splitlines()[:2]
    assert floor_newest == '3.11 3.13'
    assert subprocess.run([found, '-c', 'import sys; assert sys.version_info[:2] == (3, 11)']).returncode == 0
