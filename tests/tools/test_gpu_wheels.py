"""The wheel folder for the GPU machine: its requirement check (markers, extras, versions, the
opencv stand-in) on hand-made wheels, the download loop and the sdist build on a fake index, and
a prepared folder in the checkout when there is one. Nothing here reaches the package index: the
real folder is made by a CI step (``tools/gpu_check.py --prepare``, in ``.ci/run``)."""
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest
from packaging.utils import canonicalize_name, parse_wheel_filename

from inline_dense_dev.gpu_check import wheels

ROOT = Path(__file__).resolve().parents[2]


def make_wheel(folder: Path, name: str, version: str, requires: List[str]) -> Path:
    """A minimal wheel file: just its METADATA."""
    path = folder / f'{name}-{version}-py3-none-any.whl'
    meta = ['Metadata-Version: 2.1', f'Name: {name}', f'Version: {version}'] + [f'Requires-Dist: {r}' for r in requires]
    with zipfile.ZipFile(path, 'w') as zf:
        zf.writestr(f'{name}-{version}.dist-info/METADATA', '\n'.join(meta) + '\n')
    return path


def unmet_names(folder: Path) -> Dict[str, str]:
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
    assert 'the folder has beta 1.0' in found['beta'] and 'torch 2.11.0' in found['torch']
    problems = wheels.unmet_requirements(tmp_path, roots=['alpha', 'mmdet'])
    assert any(p.startswith('mmdet ') for p in problems) and len(problems) == 5


def test_two_versions_of_one_package_are_refused(tmp_path):
    make_wheel(tmp_path, 'alpha', '1.0', [])
    make_wheel(tmp_path, 'alpha', '1.1', [])
    with pytest.raises(wheels.WheelFolderError, match='two wheels of alpha'):
        wheels.read_folder(tmp_path)


def test_fill_closure_downloads_what_the_machine_lacks(tmp_path, monkeypatch):
    """The loop on a fake index: alpha -> beta (missing) -> numpy (on the machine); a root the
    machine has (setuptools) travels anyway; a requirement without a pin is an error."""
    index = tmp_path / 'index'
    index.mkdir()
    make_wheel(index, 'alpha', '1.0', ['beta', 'pyyaml'])
    make_wheel(index, 'beta', '2.0', ['numpy>=2', 'omega; extra == "x"'])
    make_wheel(index, 'setuptools', '80.9.0', [])
    make_wheel(index, 'gamma', '1.0', ['unpinned'])
    calls = []

    def fake_download(specs, dest, binary=True, python=wheels.PYTHON):
        calls.append(list(specs))
        for spec in specs:
            name, version = spec.split('==')
            (Path(dest) / f'{name}-{version}-py3-none-any.whl').write_bytes(
                (index / f'{name}-{version}-py3-none-any.whl').read_bytes())
        return subprocess.CompletedProcess([], 0, '', '')

    monkeypatch.setattr(wheels, 'pip_download', fake_download)
    pins = {'alpha': '1.0', 'beta': '2.0', 'setuptools': '80.9.0', 'gamma': '1.0'}
    got = wheels.fill_closure(tmp_path / 'out', pins, roots=['alpha', 'setuptools'], log=lambda _: None)
    assert sorted(got) == ['alpha', 'beta', 'setuptools']
    assert calls == [['alpha==1.0', 'setuptools==80.9.0'], ['beta==2.0']]
    pins['beta'] = '2.1'  # the lock moved on: the old wheel goes, the new one comes
    make_wheel(index, 'beta', '2.1', [])
    got = wheels.fill_closure(tmp_path / 'out', pins, roots=['alpha', 'setuptools'], log=lambda _: None)
    assert got['beta'].version == '2.1' and calls[-1] == ['beta==2.1']
    assert not (tmp_path / 'out' / 'beta-2.0-py3-none-any.whl').exists()
    with pytest.raises(wheels.WheelFolderError, match='unpinned'):
        wheels.fill_closure(tmp_path / 'out2', pins, roots=['gamma'], log=lambda _: None)


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

    def fake_download(specs, dest, binary=True, python=wheels.PYTHON):
        assert specs == ['tinypkg==0.1']
        if binary:
            return subprocess.CompletedProcess([], 1, '', 'ERROR: No matching distribution found')
        shutil.copy(sdist, dest)
        return subprocess.CompletedProcess([], 0, '', '')

    monkeypatch.setattr(wheels, 'pip_download', fake_download)
    out = tmp_path / 'out'
    out.mkdir()
    built = wheels.fetch('tinypkg', '0.1', out)
    assert built == out / 'tinypkg-0.1-py3-none-any.whl'
    assert [str(r) for r in wheels.read_wheel(built).requires] == ['addict']


def check_folder(folder: Path) -> None:
    """Complete, one pinned version each, wheels that install on CPython 3.12 x86-64 Linux, the
    fixtures inside."""
    assert wheels.unmet_requirements(folder) == []
    pins = wheels.read_lock()
    carried = wheels.read_folder(folder)
    assert set(map(canonicalize_name, wheels.ROOTS)) <= set(carried)
    for name, wheel in carried.items():
        assert wheel.version == pins[name], f'{wheel.path.name} is not the lock\'s {pins[name]}'
        tags = parse_wheel_filename(wheel.path.name)[3]
        assert any(t.interpreter in ('py3', 'py2', 'cp312') or t.abi == 'abi3' for t in tags), wheel.path.name
        assert all(t.platform == 'any' or t.platform.endswith('x86_64') for t in tags), wheel.path.name
    for name in wheels.FIXTURES:
        assert (folder / wheels.FIXTURE_DIR / name).is_file()


@pytest.mark.skipif(not (ROOT / 'gpu_wheels').is_dir(), reason='no gpu_wheels/ in this checkout (made by '
                    'python tools/gpu_check.py --prepare gpu_wheels)')
def test_checkout_gpu_wheels_is_complete():
    check_folder(ROOT / 'gpu_wheels')
