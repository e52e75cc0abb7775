"""The wheel folder that travels to a GPU machine with no network, and the check that it is complete.

The GPU machine (Python 3.12 on x86-64 Linux, CUDA torch, no mmengine/mmcv/mmdet/mmseg) gets
every missing package as a wheel pinned by ``requirements/lock.txt``, installed there with
``pip install --no-index --no-deps --target DIR``. :func:`prepare_wheel_folder` fills the folder
here: it downloads :data:`ROOTS` (``pip download --only-binary=:all: --no-deps`` for Python 3.12
manylinux), reads each wheel's ``Requires-Dist`` and downloads, round after round, every
requirement the machine lacks, so the folder is the requirement closure, not a hand-made list.
A package published only as an sdist is built here into a wheel (``pip wheel --no-deps``),
which must come out pure Python (``none-any``). :func:`unmet_requirements` says what a folder
leaves unsatisfied.
"""
import email.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

REPO_ROOT = Path(__file__).resolve().parents[2]
LOCK_FILE = REPO_ROOT / 'requirements' / 'lock.txt'

# What the check imports that the GPU machine lacks, with why when a package's metadata does not say it.
ROOTS: Dict[str, str] = {
    'mmengine': 'the runner, configs, registries',
    'mmcv-lite': 'mmcv without compiled ops (inline_dense.ops serves mmcv._ext)',
    'mmdet': 'detectors, Swin-T and PVT-T',
    'mmsegmentation': 'mmseg registries (imported by inline_dense.models)',
    'ftfy': "mmseg.utils imports it at import time; mmsegmentation's metadata lists it only as an extra",
    'setuptools': "mmengine 0.10.7 resolves 'mmdet::' config paths with pkg_resources, which setuptools >= 81 "
                  "dropped; the machine's setuptools version is unknown, so the lock's (< 81) travels",
}

# The GPU machine's packages ('python3 -m pip list' of its image, read 2026-11-17, device/KINDS.md).
GPU_MACHINE_PACKAGES = frozenset(canonicalize_name(n) for n in '''
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax
llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack
multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft
nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec
patsy peft pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11
py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools
shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server
tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3
uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
'''.split())
# Versions seen there (the same pip list); a requirement on these is checked against them.
GPU_MACHINE_VERSIONS = {'torch': '2.11.0', 'torchvision': '0.26.0', 'numpy': '2.5.2', 'triton': '3.6.0',
                        'safetensors': '0.8.0', 'huggingface-hub': '1.33.0'}
# A requirement on the key is met by the value: the same import name (cv2) without GUI libraries.
SATISFIED_BY = {'opencv-python': 'opencv-python-headless'}

PYTHON = '3.12'  # the GPU machine's


def target_env(python: str = PYTHON) -> Dict[str, str]:
    """Marker values of CPython ``python`` on x86-64 Linux; the empty extra turns off every
    'extra == ...' requirement."""
    return dict(python_version=python, python_full_version=f'{python}.0', sys_platform='linux',
                platform_system='Linux', platform_machine='x86_64', os_name='posix',
                implementation_name='cpython', platform_python_implementation='CPython', extra='')
PLATFORMS = ('manylinux_2_28_x86_64', 'manylinux_2_27_x86_64', 'manylinux_2_24_x86_64',
             'manylinux_2_17_x86_64', 'manylinux2014_x86_64', 'manylinux1_x86_64')
FIXTURES = ('mmcv_ops_reference.pt',)
FIXTURE_DIR = 'fixtures'


class WheelFolderError(RuntimeError):
    """The wheel folder cannot be made; the message says what to do."""


@dataclass
class Wheel:
    """One carried wheel: its normalised name, version, file and the requirements that apply."""
    name: str
    version: str
    path: Path
    requires: List[Requirement] = field(default_factory=list)


def read_lock(path: Path = LOCK_FILE) -> Dict[str, str]:
    """``name==version`` lines of the lock file -> {normalised name: version}. uv's format:
    ``--hash`` continuation lines are skipped, a line's ``\\`` and markers dropped (a name locked
    once per Python keeps its first version)."""
    pins: Dict[str, str] = {}
    for line in Path(path).read_text(encoding='utf-8').splitlines():
        line = line.split('#')[0].split(';')[0].rstrip(' \\').strip()
        if line and not line.startswith('-'):
            name, sep, version = line.partition('==')
            if not sep:
                raise WheelFolderError(f'{path}: {line!r} is not name==version; regenerate the lock with '
                                       f'`bash tools/setup_env.sh --update-lock`.')
            pins.setdefault(canonicalize_name(name), version.strip())
    return pins


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


def read_folder(folder: Path, python: str = PYTHON) -> Dict[str, Wheel]:
    """The folder's wheels by normalised name; two versions of one package are an error (pip
    would refuse to install both)."""
    wheels: Dict[str, Wheel] = {}
    for path in sorted(Path(folder).glob('*.whl')):
        wheel = read_wheel(path, python)
        if wheel.name in wheels:
            raise WheelFolderError(f'{folder} holds two wheels of {wheel.name}: {wheels[wheel.name].path.name} and '
                                   f'{path.name}; delete the folder and prepare it again.')
        wheels[wheel.name] = wheel
    return wheels


def on_machine(name: str, machine: Iterable[str] = GPU_MACHINE_PACKAGES) -> Optional[str]:
    """The machine's package that meets a requirement on ``name`` (itself or its stand-in), or None."""
    machine = set(machine)
    for candidate in (name, SATISFIED_BY.get(name)):
        if candidate in machine:
            return candidate
    return None


def unmet(wheels: Mapping[str, Wheel], machine: Iterable[str] = GPU_MACHINE_PACKAGES,
          machine_versions: Mapping[str, str] = GPU_MACHINE_VERSIONS) -> List[Tuple[str, Requirement, str]]:
    """(wheel name, requirement, why) for every requirement of the wheels that neither another
    wheel nor the machine meets, at a version the specifier allows."""
    machine = set(machine)
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
            elif provider in machine_versions and req.specifier and \
                    not req.specifier.contains(machine_versions[provider], prereleases=True):
                out.append((wheel.name, req, f'the GPU machine has {provider} {machine_versions[provider]}'))
    return out


def unmet_requirements(folder: Path, roots: Iterable[str] = ROOTS, python: str = PYTHON) -> List[str]:
    """What the folder leaves unsatisfied, one sentence each (empty: complete): roots it lacks
    (each must travel), and requirements of its wheels that nothing meets."""
    wheels = read_folder(folder, python)
    messages = [f'{name} ({ROOTS.get(name, "needed by the check")}) is not in {folder}'
                for name in map(canonicalize_name, roots) if name not in wheels]
    messages += [f'{owner} needs {req}: {why}' for owner, req, why in unmet(wheels)]
    return messages


def pip_download(specs: Sequence[str], dest: Path, binary: bool = True,
                 python: str = PYTHON) -> subprocess.CompletedProcess:
    """``pip download --no-deps`` of ``specs`` into ``dest``: CPython ``python`` manylinux
    x86-64 wheels, or (``binary=False``) sdists."""
    cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps', '--disable-pip-version-check', '-q', '-d', str(dest)]
    if binary:
        cmd += ['--only-binary=:all:', '--python-version', python, '--implementation', 'cp',
                '--abi', 'cp' + python.replace('.', '')]
        for platform in PLATFORMS:
            cmd += ['--platform', platform]
    else:
        cmd += ['--no-binary=:all:']
    return subprocess.run(cmd + list(specs), capture_output=True, text=True)


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


def fetch(name: str, version: str, dest: Path, python: str = PYTHON) -> Path:
    """The wheel of ``name==version`` in ``dest``: a binary/pure wheel from the index, else the
    sdist built here (pure packages only)."""
    spec = f'{name}=={version}'
    res = pip_download([spec], dest, python=python)
    found = [p for p in Path(dest).glob('*.whl') if canonicalize_name(parse_wheel_filename(p.name)[0]) == name]
    if res.returncode == 0 and found:
        return found[0]
    with tempfile.TemporaryDirectory() as tmp:
        sdist = pip_download([spec], Path(tmp), binary=False)
        sources = [p for p in Path(tmp).iterdir() if p.name.endswith(('.tar.gz', '.zip'))]
        if sdist.returncode or not sources:
            raise WheelFolderError(f'no manylinux x86-64 wheel for Python {python} and no sdist of {spec} on the index '
                                   f'(pip: {(res.stderr or sdist.stderr).strip()[-600:]}); check the network/index '
                                   f'or the pin in {LOCK_FILE}.')
        return build_pure_wheel(sources[0], dest)


def fill_closure(dest: Path, pins: Mapping[str, str], roots: Iterable[str] = ROOTS,
                 log=print, python: str = PYTHON) -> Dict[str, Wheel]:
    """Downloads the roots, then every requirement of the folder's wheels that the machine lacks
    (a root travels even when the machine has a package of that name: its version matters),
    until nothing is missing. Versions come from ``pins``."""
    dest.mkdir(parents=True, exist_ok=True)
    for wheel in read_folder(dest, python).values():  # from an older lock: replaced
        if pins.get(wheel.name) != wheel.version:
            log(f'[wheels] removing {wheel.path.name} (the lock pins {pins.get(wheel.name)})')
            wheel.path.unlink()
    wanted = [canonicalize_name(r) for r in roots]
    while True:
        wheels = read_folder(dest, python)
        todo = [n for n in wanted if n not in wheels]
        for owner, req, why in unmet(wheels):
            name = canonicalize_name(req.name)
            if name not in wheels and name not in todo:
                todo.append(name)
            elif name in wheels:
                raise WheelFolderError(f'{owner} needs {req} but {why}: the lock ({LOCK_FILE}) pins versions that '
                                       f'do not fit together; regenerate it.')
        if not todo:
            return wheels
        missing = [name for name in todo if name not in pins]
        if missing:
            raise WheelFolderError(f'{missing} must travel to the GPU machine but {LOCK_FILE} has no pin for them; '
                                   f'add them to the lock (bash tools/setup_env.sh --update-lock).')
        log(f'[wheels] {" ".join(f"{n}=={pins[n]}" for n in todo)}')
        if pip_download([f'{n}=={pins[n]}' for n in todo], dest, python=python).returncode:  # else one by one
            for name in todo:
                fetch(name, pins[name], dest, python)
        wanted = []


def copy_fixtures(dest: Path, sources: Sequence[Path]) -> List[Path]:
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


def default_fixture_sources() -> List[Path]:
    """Where the fixtures are looked for: ``../shared/fixtures`` beside the checkout, then the tests' copies."""
    return [REPO_ROOT.parent / 'shared' / 'fixtures', REPO_ROOT / 'tests' / 'data' / 'fixtures']


def folder_size(folder: Path) -> int:
    """Bytes of all files under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob('*') if p.is_file())


def prepare_wheel_folder(dest: Path, lock: Path = LOCK_FILE, fixture_sources: Optional[Sequence[Path]] = None,
                         log=print, python: str = PYTHON) -> Dict[str, object]:
    """Fills ``dest`` with the closure's wheels and the fixtures; returns what it holds and its size.
    Raises :class:`WheelFolderError` when the result leaves a requirement unmet."""
    dest = Path(dest)
    wheels = fill_closure(dest, read_lock(lock), log=log, python=python)
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
