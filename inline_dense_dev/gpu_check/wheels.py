"""The wheel folder that travels to a GPU machine with no network, and the check that it is complete.

The GPU machine (Python 3.12 on x86-64 Linux, CUDA torch, no mmengine/mmcv/mmdet/mmseg) gets every
package it lacks as a wheel, installed there with ``pip install --no-index --no-deps --target DIR``.
:func:`closure` computes the list from uv.lock alone: from :data:`ROOTS` it follows the locked
dependencies (their markers evaluated for that machine, the default stack's fork) and stops at what
the machine's image ships (:data:`DEVICE_IMAGE`). :func:`prepare_wheel_folder` downloads those wheels
from the URLs uv.lock pins, checking each file's hash; a package locked only as an sdist is built here
into a wheel, which must be pure Python. :func:`unmet_requirements` checks a folder independently of
the lock: every ``Requires-Dist`` of its wheels is met by another wheel or by the machine.
"""
import email.parser
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename

from .. import uvlock

# What the check imports that the GPU machine lacks, with why when a package's metadata does not say it.
ROOTS: dict[str, str] = {
    'mmengine': 'the runner, configs, registries',
    'mmcv-lite': 'mmcv without compiled ops (inline_dense.ops serves mmcv._ext)',
    'mmdet': 'detectors, Swin-T and PVT-T',
    'mmsegmentation': 'mmseg registries (imported by inline_dense.models)',
    'ftfy': "mmseg.utils imports it at import time; mmsegmentation's metadata lists it only as an extra",
    'setuptools': "mmengine 0.10 resolves 'mmdet::' config paths with pkg_resources, which setuptools >= 81 "
                  "dropped; the machine's setuptools version is unknown, so the lock's (< 81) travels",
}

# What the GPU machine's image ships among the packages the closure and the check meet, with the
# version where one was seen (None: not read). Source: the device tool's KINDS.md, nvidia-h200,
# "Python packages already there" (read on a machine of that image on 2026-11-17) and its "pip list"
# row (2026-11). When the image changes: read those again, then prepare the folder again.
DEVICE_IMAGE_READ = '2026-11-17'
DEVICE_IMAGE: dict[str, str | None] = {
    'matplotlib': None, 'numpy': '2.5.2', 'opencv-python-headless': None, 'packaging': None, 'pillow': None,
    'pyyaml': None, 'rich': None, 'safetensors': '0.8.0', 'scipy': None, 'six': None, 'torch': '2.11.0',
    'torchvision': '0.26.0', 'tqdm': None, 'triton': '3.6.0',
}
# A requirement on the key is met by the value: the same import name (cv2) without GUI libraries.
SATISFIED_BY = {'opencv-python': 'opencv-python-headless'}

PYTHON = '3.12'  # the GPU machine's
PLATFORMS = ('manylinux_2_28_x86_64', 'manylinux_2_27_x86_64', 'manylinux_2_24_x86_64',
             'manylinux_2_17_x86_64', 'manylinux2014_x86_64', 'manylinux1_x86_64')
FIXTURES = ('mmcv_ops_reference.pt',)
FIXTURE_DIR = 'fixtures'
STACK_EXTRA = 'extra-12-inline-dense-lite'  # uv's marker for the default stack's fork ([lite])


def target_env(python: str = PYTHON, extra: str = '') -> dict[str, str]:
    """Marker values of CPython ``python`` on x86-64 Linux; ``extra`` '' turns off every 'extra == ...'."""
    return dict(python_version=python, python_full_version=f'{python}.0', sys_platform='linux',
                platform_system='Linux', platform_machine='x86_64', os_name='posix',
                implementation_name='cpython', platform_python_implementation='CPython', extra=extra)


class WheelFolderError(RuntimeError):
    """The wheel folder cannot be made; the message says what to do."""


@dataclass
class Wheel:
    """One carried wheel: its normalised name, version, file and the requirements that apply."""
    name: str
    version: str
    path: Path
    requires: list[Requirement] = field(default_factory=list)


def applies(req: Requirement, python: str = PYTHON) -> bool:
    """Whether ``req`` applies on the GPU machine (its markers for CPython ``python`` on Linux
    x86-64; extras off)."""
    return req.marker is None or req.marker.evaluate(target_env(python))


def read_wheel(path: Path, python: str = PYTHON) -> Wheel:
    """Name, version and applicable ``Requires-Dist`` of a wheel file, from its METADATA."""
    name, version, _, _ = parse_wheel_filename(path.name)
    with zipfile.ZipFile(path) as zf:
        meta_name = next((n for n in zf.namelist() if re.fullmatch(r'[^/]+\.dist-info/METADATA', n)), None)
        if meta_name is None:
            raise WheelFolderError(f'{path.name} has no .dist-info/METADATA: not a wheel; delete it and prepare again.')
        meta = email.parser.Parser().parsestr(zf.read(meta_name).decode('utf-8'), headersonly=True)
    requires = [Requirement(r) for r in meta.get_all('Requires-Dist') or []]
    return Wheel(canonicalize_name(name), str(version), path, [r for r in requires if applies(r, python)])


def read_folder(folder: Path, python: str = PYTHON) -> dict[str, Wheel]:
    """The folder's wheels by normalised name; two versions of one package are an error (pip
    would refuse to install both)."""
    wheels: dict[str, Wheel] = {}
    for path in sorted(Path(folder).glob('*.whl')):
        wheel = read_wheel(path, python)
        if wheel.name in wheels:
            raise WheelFolderError(f'{folder} holds two wheels of {wheel.name}: {wheels[wheel.name].path.name} and '
                                   f'{path.name}; delete the folder and prepare it again.')
        wheels[wheel.name] = wheel
    return wheels


def on_machine(name: str, machine: Iterable[str] = DEVICE_IMAGE) -> str | None:
    """The machine's package that meets a requirement on ``name`` (itself or its stand-in), or None."""
    machine = set(machine)
    for candidate in (name, SATISFIED_BY.get(name)):
        if candidate in machine:
            return candidate
    return None


def unmet(wheels: Mapping[str, Wheel], machine: Mapping[str, str | None] = DEVICE_IMAGE,
          ) -> list[tuple[str, Requirement, str]]:
    """(wheel name, requirement, why) for every requirement of the wheels that neither another
    wheel nor the machine meets, at a version the specifier allows."""
    out = []
    for wheel in wheels.values():
        for req in wheel.requires:
            name = canonicalize_name(req.name)
            have = wheels.get(name)
            if have is not None:
                if req.specifier and not req.specifier.contains(have.version, prereleases=True):
                    out.append((wheel.name, req, f'the folder has {name} {have.version}'))
                continue
            provider = on_machine(name, machine)
            if provider is None:
                out.append((wheel.name, req, 'neither in the folder nor on the GPU machine'))
            elif machine[provider] and req.specifier and \
                    not req.specifier.contains(machine[provider], prereleases=True):
                out.append((wheel.name, req, f'the GPU machine has {provider} {machine[provider]}'))
    return out


def unmet_requirements(folder: Path, roots: Iterable[str] = ROOTS, python: str = PYTHON) -> list[str]:
    """What the folder leaves unsatisfied, one sentence each (empty: complete): roots it lacks
    (each must travel), and requirements of its wheels that nothing meets."""
    wheels = read_folder(folder, python)
    messages = [f'{name} ({ROOTS.get(name, "needed by the check")}) is not in {folder}'
                for name in map(canonicalize_name, roots) if name not in wheels]
    messages += [f'{owner} needs {req}: {why}' for owner, req, why in unmet(wheels)]
    return messages


def closure(packages: Mapping[str, list[uvlock.Package]], roots: Iterable[str] = ROOTS,
            machine: Iterable[str] = DEVICE_IMAGE, python: str = PYTHON) -> dict[str, uvlock.Package]:
    """The locked packages that must travel: the roots (even where the machine has a package of that
    name: its version matters) and every locked dependency they reach that the machine lacks."""
    env = target_env(python, STACK_EXTRA)
    todo = [(canonicalize_name(r), None, True) for r in roots]
    out: dict[str, uvlock.Package] = {}
    while todo:
        name, version, root = todo.pop()
        if name in out or (not root and on_machine(name, machine)):
            continue
        try:
            found = uvlock.package(name, packages, version)
        except uvlock.LockError as exc:
            raise WheelFolderError(f'{name} must travel to the GPU machine but {exc}') from exc
        out[name] = found
        for dep in found.dependencies:
            if not dep.marker or Marker(dep.marker).evaluate(env):
                todo.append((dep.name, dep.version, False))
    return out


def machine_tags(python: str = PYTHON) -> set:
    """The wheel tags the GPU machine's CPython ``python`` installs."""
    cp = 'cp' + python.replace('.', '')
    tags = {Tag(i, 'none', p) for i in ('py3', 'py2.py3', 'py' + cp[2:], cp) for p in ('any', *PLATFORMS)}
    tags |= {Tag(cp, a, p) for a in (cp, 'abi3') for p in PLATFORMS}
    tags |= {Tag(f'cp3{m}', 'abi3', p) for m in range(2, int(python.split('.')[1])) for p in PLATFORMS}
    return tags


def download(url: str, digest: str, dest: Path) -> Path:
    """``url`` into ``dest``, its ``sha256:...`` digest checked (the one uv.lock records)."""
    path = Path(dest) / url.rsplit('/', 1)[1]
    with urllib.request.urlopen(url, timeout=300) as response, open(path, 'wb') as f:
        shutil.copyfileobj(response, f)
    if 'sha256:' + hashlib.sha256(path.read_bytes()).hexdigest() != digest:
        path.unlink()
        raise WheelFolderError(f'{path.name} does not match the hash in uv.lock: a proxy or mirror serves other '
                               'files than the index; use the index itself')
    return path


def fetch(package: uvlock.Package, dest: Path, python: str = PYTHON,
          get: Callable[[str, str, Path], Path] = download) -> Path:
    """The wheel of a locked package for the GPU machine in ``dest``: the locked one that installs there,
    else the locked sdist built here (pure Python only)."""
    tags = machine_tags(python)
    for wheel in package.wheels:
        url = str(wheel['url'])
        if parse_wheel_filename(url.rsplit('/', 1)[1])[3] & tags:
            return get(url, str(wheel['hash']), dest)
    if package.sdist is None:
        raise WheelFolderError(f'uv.lock has no wheel of {package.name}=={package.version} for CPython {python} on '
                               'x86-64 Linux and no sdist: pick another version in pyproject.toml, run `uv lock`')
    with tempfile.TemporaryDirectory() as tmp:
        return build_pure_wheel(get(str(package.sdist['url']), str(package.sdist['hash']), Path(tmp)), dest)


def build_pure_wheel(source: Path, dest: Path) -> Path:
    """A wheel of ``source`` (an sdist or a project folder) built here with ``pip wheel --no-deps``;
    it must be pure Python (``*-none-any.whl``): a binary one built here need not fit the GPU machine."""
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--disable-pip-version-check', '-q',
                              '-w', tmp, str(source)], capture_output=True, text=True)
        built = list(Path(tmp).glob('*.whl'))
        if res.returncode or len(built) != 1:
            raise WheelFolderError(f'could not build a wheel of {source}: {res.stderr.strip()[-800:]}')
        _, _, _, tags = parse_wheel_filename(built[0].name)
        if not all(t.abi == 'none' and t.platform == 'any' for t in tags):
            raise WheelFolderError(f'{source} builds {built[0].name}, a binary wheel for this machine, not the GPU '
                                   f"machine: find a manylinux wheel of it or drop it.")
        target = Path(dest) / built[0].name
        shutil.move(str(built[0]), target)
    return target



def fill_closure(dest: Path, packages: Mapping[str, list[uvlock.Package]], roots: Iterable[str] = ROOTS,
                 log=print, python: str = PYTHON, get: Callable[[str, str, Path], Path] = download
                 ) -> dict[str, Wheel]:
    """``dest`` holding exactly the closure's wheels: wheels of other versions go, missing ones come."""
    dest.mkdir(parents=True, exist_ok=True)
    wanted = closure(packages, roots, python=python)
    for wheel in read_folder(dest, python).values():
        if wheel.name not in wanted or wanted[wheel.name].version != wheel.version:
            log(f'[wheels] removing {wheel.path.name} (not in the closure of uv.lock)')
            wheel.path.unlink()
    have = read_folder(dest, python)
    for name, package in sorted(wanted.items()):
        if name not in have:
            log(f'[wheels] {name}=={package.version}')
            fetch(package, dest, python, get)
    return read_folder(dest, python)


def copy_fixtures(dest: Path, sources: Sequence[Path]) -> list[Path]:
    """Copies :data:`FIXTURES` from the first source folder holding each into ``dest/fixtures``."""
    out_dir = Path(dest) / FIXTURE_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in FIXTURES:
        src = next((Path(s) / name for s in sources if (Path(s) / name).is_file()), None)
        if src is None:
            raise WheelFolderError(f'fixture {name} not found in {[str(s) for s in sources]}; pass the folder '
                                   f'holding it (e.g. ../shared/fixtures) with --fixtures-from.')
        shutil.copyfile(src, out_dir / name)
        copied.append(out_dir / name)
    return copied


def default_fixture_sources() -> list[Path]:
    """Where the fixtures are looked for: ``../shared/fixtures`` beside the checkout, then the tests' copies."""
    root = uvlock.LOCK.parent
    return [root.parent / 'shared' / 'fixtures', root / 'tests' / 'data' / 'fixtures']


def folder_size(folder: Path) -> int:
    """Bytes of all files under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob('*') if p.is_file())


def prepare_wheel_folder(dest: Path, lock: Path = uvlock.LOCK, fixture_sources: Sequence[Path] | None = None,
                         log=print, python: str = PYTHON) -> dict[str, object]:
    """Fills ``dest`` with the closure's wheels and the fixtures; returns what it holds and its size.
    Raises :class:`WheelFolderError` when the result leaves a requirement unmet."""
    dest = Path(dest)
    wheels = fill_closure(dest, uvlock.read(lock), log=log, python=python)
    fixtures = copy_fixtures(dest, fixture_sources or default_fixture_sources())
    problems = unmet_requirements(dest, python=python)
    if problems:
        raise WheelFolderError('the wheel folder is incomplete:\n  ' + '\n  '.join(problems))
    return dict(folder=str(dest), wheels=sorted(w.path.name for w in wheels.values()),
                fixtures=[p.name for p in fixtures], bytes=folder_size(dest))


def install_offline(folder: Path, target: Path) -> subprocess.CompletedProcess:
    """``pip install --no-index --no-deps --target target`` of every wheel in ``folder`` (no network)."""
    wheels = sorted(str(p) for p in Path(folder).glob('*.whl'))
    if not wheels:
        raise WheelFolderError(f'no wheels in {folder}; make them here with `python tools/gpu_check.py --prepare '
                               f'{folder}` and carry the folder.')
    cmd = [sys.executable, '-m', 'pip', 'install', '-q', '--no-index', '--no-deps', '--no-compile',
           '--disable-pip-version-check', '--upgrade', '--target', str(target), *wheels]
    return subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PIP_NO_INPUT='1'))


def use_site(target: Path) -> None:
    """Makes what :func:`install_offline` put into ``target`` importable in this process (first on
    ``sys.path``); the check's workers get it through their own path (the runner passes it on)."""
    sys.path.insert(0, str(target))
