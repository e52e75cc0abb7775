"""The wheel folder for the GPU machine: its requirement check (markers, extras, versions, the
opencv stand-in) on hand-made wheels, the closure of a small lock, the download loop and the sdist
build on a fake index, and the closure of the real uv.lock. Nothing here reaches the package index:
the real folder is made by a CI step (``tools/gpu_check.py --prepare``, in ``.ci/run``), which then
runs this file with $INLINE_DENSE_GPU_WHEELS naming it: its completeness test runs there."""
import dataclasses
import hashlib
import os
import shutil
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename

from inline_dense_dev import uvlock
from inline_dense_dev.gpu_check import wheels

ROOT = Path(__file__).resolve().parents[2]


def make_wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A minimal wheel file: just its METADATA."""
    path = folder / f'{name}-{version}-py3-none-any.whl'
    meta = ['Metadata-Version: 2.1', f'Name: {name}', f'Version: {version}'] + [f'Requires-Dist: {r}' for r in requires]
    with zipfile.ZipFile(path, 'w') as zf:
        zf.writestr(f'{name}-{version}.dist-info/METADATA', '\n'.join(meta) + '\n')
    return path


def unmet_names(folder: Path) -> dict[str, str]:
    return {canonicalize_name(req.name): why for _, req, why in wheels.unmet(wheels.read_folder(folder))}


def test_unmet_follows_markers_extras_versions_and_the_opencv_stand_in(tmp_path):
    make_wheel(tmp_path, 'alpha', '1.0', [
        'beta>=2',                          # in the folder, but 1.0: unmet
        'numpy', 'opencv-python>=3',        # on the machine (opencv as opencv-python-headless)
        'torch>=2.12',                      # on the machine, but 2.11.0: unmet
        'epsilon',                          # nowhere: unmet
        'gamma; extra == "all"',            # extras are not installed
        'delta; sys_platform == "win32"',   # not for Linux
        'tomli>=2; python_version < "3.11"',  # not for 3.12
    ])
    make_wheel(tmp_path, 'beta', '1.0', ['zeta; python_version >= "3.12"'])  # applies: unmet
    found = unmet_names(tmp_path)
    assert set(found) == {'beta', 'torch', 'epsilon', 'zeta'}
    assert 'the folder has beta 1.0' in found['beta']
    assert 'torch 2.11.0' in found['torch']
    problems = wheels.unmet_requirements(tmp_path, roots=['alpha', 'mmdet'])
    assert any(p.startswith('mmdet ') for p in problems)
    assert len(problems) == 5


def test_two_versions_of_one_package_are_refused(tmp_path):
    make_wheel(tmp_path, 'alpha', '1.0', [])
    make_wheel(tmp_path, 'alpha', '1.1', [])
    with pytest.raises(wheels.WheelFolderError, match='two wheels of alpha'):
        wheels.read_folder(tmp_path)


def fake_lock(tmp_path: Path, packages: dict[str, tuple]) -> dict[str, list]:
    """A uv.lock of ``name: (version, [dependencies as TOML inline tables])``, each with one wheel
    (or, version ending in '-sdist', an sdist only) at a file:// URL of ``tmp_path / 'index'``."""
    index = tmp_path / 'index'
    index.mkdir(exist_ok=True)
    text = 'version = 1\n'
    for name, (version, deps) in packages.items():
        path = make_wheel(index, name, version, [])
        digest = 'sha256:' + hashlib.sha256(path.read_bytes()).hexdigest()
        text += (f'[[package]]\nname = "{name}"\nversion = "{version}"\ndependencies = [{", ".join(deps)}]\n'
                 f'wheels = [{{ url = "file://{path}", hash = "{digest}" }}]\n')
    (tmp_path / 'uv.lock').write_text(text)
    return uvlock.read(tmp_path / 'uv.lock')


def copy_get(url: str, digest: str, dest: Path) -> Path:
    path = Path(url.removeprefix('file://'))
    assert 'sha256:' + hashlib.sha256(path.read_bytes()).hexdigest() == digest
    return Path(shutil.copy(path, dest))


def test_the_closure_follows_the_lock_to_what_the_machine_has(tmp_path):
    """alpha -> beta (missing) -> numpy (on the machine); gamma only on Windows; delta only for the
    other stack; a root the machine has (setuptools) travels anyway; a name the lock lacks is an error."""
    packages = fake_lock(tmp_path, {
        'alpha': ('1.0', ['{ name = "beta" }', '{ name = "pyyaml" }',
                          '{ name = "gamma", marker = "sys_platform == \'win32\'" }',
                          '{ name = "delta", marker = "extra == \'extra-12-inline-dense-onedl\'" }']),
        'beta': ('2.0', ['{ name = "numpy" }',
                         '{ name = "scipy", version = "1.18.1", marker = "python_full_version >= \'3.12\'" }']),
        'setuptools': ('80.9.0', []), 'gamma': ('1.0', []), 'delta': ('1.0', []), 'numpy': ('2.4.0', []),
        'scipy': ('1.18.1', ['{ name = "epsilon" }']), 'epsilon': ('1.0', []),
        'orphan': ('1.0', ['{ name = "missing" }'])})
    got = wheels.closure(packages, roots=['alpha', 'setuptools'])
    assert sorted(got) == ['alpha', 'beta', 'setuptools']  # scipy is on the machine: epsilon is not followed
    with pytest.raises(wheels.WheelFolderError, match='missing must travel'):
        wheels.closure(packages, roots=['orphan'])
    out = tmp_path / 'out'
    logs: list[str] = []
    folder = wheels.fill_closure(out, packages, roots=['alpha', 'setuptools'], log=logs.append, get=copy_get)
    assert sorted(folder) == ['alpha', 'beta', 'setuptools']
    assert len(logs) == 3
    make_wheel(out, 'stale', '0.1', [])  # from an older lock: removed
    newer = make_wheel(tmp_path / 'index', 'beta', '2.1', [])  # the lock moved on: the old wheel goes
    packages['beta'] = [dataclasses.replace(packages['beta'][0], version='2.1', wheels=(
        {'url': f'file://{newer}', 'hash': 'sha256:' + hashlib.sha256(newer.read_bytes()).hexdigest()},))]
    folder = wheels.fill_closure(out, packages, roots=['alpha', 'setuptools'], log=logs.append, get=copy_get)
    assert folder['beta'].version == '2.1'
    assert sorted(folder) == ['alpha', 'beta', 'setuptools']
    assert sorted(p.name for p in out.iterdir())[1] == 'beta-2.1-py3-none-any.whl'


def test_the_real_lock_gives_the_mm_stack_and_nothing_the_machine_has():
    got = wheels.closure(uvlock.read())
    assert set(map(canonicalize_name, wheels.ROOTS)) <= set(got)
    assert not {'numpy', 'torch', 'opencv-python', 'pillow', 'scipy'} & set(got)
    assert got['mmcv-lite'].version == uvlock.package('mmcv-lite').version
    for package in got.values():  # each has a file the machine installs (or a pure sdist, built here)
        tags = [parse_wheel_filename(str(w['url']).rsplit('/', 1)[1])[3] for w in package.wheels]
        assert package.sdist or any(t & wheels.machine_tags() for t in tags), package.name


@pytest.mark.slow
def test_sdist_only_package_is_built_into_a_pure_wheel(tmp_path, monkeypatch):
    """No wheel on the (fake) index, an sdist: ``fetch`` builds it here into a pure wheel, with this
    environment's setuptools (no build isolation, no index)."""
    monkeypatch.setenv('PIP_NO_INDEX', '1')
    monkeypatch.setenv('PIP_NO_BUILD_ISOLATION', '0')  # pip reads this as --no-build-isolation
    project = tmp_path / 'tinypkg-0.1'
    (project / 'tinypkg').mkdir(parents=True)
    (project / 'tinypkg' / '__init__.py').write_text('VALUE = 1\n')
    (project / 'pyproject.toml').write_text('[build-system]\nrequires = ["setuptools>=61"]\n'
                                            'build-backend = "setuptools.build_meta"\n'
                                            '[project]\nname = "tinypkg"\nversion = "0.1"\n'
                                            'dependencies = ["addict"]\n')
    sdist = tmp_path / 'tinypkg-0.1.tar.gz'
    with tarfile.open(sdist, 'w:gz') as tf:
        tf.add(project, arcname=project.name)

    digest = 'sha256:' + hashlib.sha256(sdist.read_bytes()).hexdigest()
    windows_only = ({'url': 'file:///x/tinypkg-0.1-cp313-cp313-win_amd64.whl', 'hash': 'sha256:0'},)
    locked = uvlock.Package('tinypkg', '0.1', (), {}, windows_only, {'url': f'file://{sdist}', 'hash': digest})
    out = tmp_path / 'out'
    out.mkdir()
    built = wheels.fetch(locked, out, get=copy_get)  # no wheel for the machine: the sdist, built here
    assert built == out / 'tinypkg-0.1-py3-none-any.whl'
    assert [str(r) for r in wheels.read_wheel(built).requires] == ['addict']


def check_folder(folder: Path) -> None:
    """Complete, one pinned version each, wheels that install on CPython 3.12 x86-64 Linux, the
    fixtures inside."""
    assert wheels.unmet_requirements(folder) == []
    wanted = wheels.closure(uvlock.read())
    carried = wheels.read_folder(folder)
    assert set(carried) == set(wanted)
    for name, wheel in carried.items():
        assert wheel.version == wanted[name].version, f'{wheel.path.name} is not the lock\'s {wanted[name].version}'
        tags = parse_wheel_filename(wheel.path.name)[3]
        assert any(t.interpreter in ('py3', 'py2', 'cp312') or t.abi == 'abi3' for t in tags), wheel.path.name
        assert all(t.platform == 'any' or t.platform.endswith('x86_64') for t in tags), wheel.path.name
    for name in wheels.FIXTURES:
        assert (folder / wheels.FIXTURE_DIR / name).is_file()


PREPARED = Path(os.environ.get('INLINE_DENSE_GPU_WHEELS') or ROOT / 'gpu_wheels')


@pytest.mark.skipif(not PREPARED.is_dir() and not os.environ.get('INLINE_DENSE_GPU_WHEELS'),
                    reason='no prepared folder: $INLINE_DENSE_GPU_WHEELS (CI sets it) or gpu_wheels/ (made by python '
                    'tools/gpu_check.py --prepare gpu_wheels)')
def test_the_prepared_gpu_wheels_are_complete():
    check_folder(PREPARED)
