"""The compiled mmcv option of the setup (``MMCV=full bash tools/setup_env.sh``; STACK=openmmlab).

The environment is synced without mmcv-lite (:mod:`.env`'s ``sync_args``); this module puts in its place mmcv
of the same version built from its sdist (uv.lock pins its URL and hash) with all its ops, with the
build tools of requirements/build.txt and the C++ standard the installed torch's headers need
(``torch_cxx_std.py`` here; mmcv 2.1.0 hard-codes an older one). The wheel is cached under
``$INLINE_DENSE_CACHE/wheels/<key>``, the key naming what changes the build: mmcv, torch, Python, the
ops target (cpu / cudaX) and the build tools. ``--check-first-time`` rehearses the first steps
(fetch, prepare, build the Python part) in a throw-away environment, compiling nothing.
"""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

from .. import uvlock
from .env import BUILD, Settings, SetupError, child_env, run_uv, say

CXX_PROBE = Path(__file__).with_name('torch_cxx_std.py')
# mmcv 2.1.0's setup.py reads its version through exec() into locals(), which Python 3.13 no longer
# updates (PEP 667): the build fails there with KeyError: '__version__'.
FULL_PYTHONS = ((3, 11), (3, 12))


def check_python(version) -> None:
    if tuple(version) not in FULL_PYTHONS:
        names = ' or '.join(f'{major}.{minor}' for major, minor in FULL_PYTHONS)
        newest = '{}.{}'.format(*FULL_PYTHONS[-1])
        raise SetupError(f"MMCV=full does not build on Python {version[0]}.{version[1]}: mmcv 2.1.0's setup.py "
                         "reads its version through exec() and locals(), which Python 3.13 changed (PEP 667)",
                         f'use MMCV=lite (no compiler; the stand-in serves the ops the configs use), or Python '
                         f'{names}: MMCV=full PYTHON=python{newest} bash tools/setup_env.sh')


def compiled_ops_target(settings: Settings, torch_cuda: str | None, cuda_available: bool) -> str:
    """'cpu' or 'cuda<version>'. FORCE_CUDA wins; else CUDA ops when torch sees a GPU and nvcc exists."""
    cuda = settings.force_cuda == '1' or (settings.force_cuda == '' and cuda_available and bool(shutil.which('nvcc')))
    return f'cuda{torch_cuda}' if cuda and torch_cuda else 'cpu'


def wheel_key(mmcv_version: str, torch_version: str, python: str, ops: str) -> str:
    tools = hashlib.sha256(BUILD.read_bytes() + CXX_PROBE.read_bytes()).hexdigest()[:16]
    return f'mmcv-{mmcv_version}_torch-{torch_version}_py{python}_{ops}_{tools}'


def cached_wheel(folder: Path) -> Path | None:
    wheels = sorted(folder.glob('mmcv-*.whl'))
    return wheels[0] if wheels else None


def store_wheel(wheel: Path, folder: Path) -> Path:
    """Copies ``wheel`` into ``folder`` atomically; other keys' folders are left alone."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(wheel, folder / '.partial')
    os.replace(folder / '.partial', folder / wheel.name)
    return folder / wheel.name


def fetch_sdist(dest: Path) -> Path:
    """mmcv's sdist as uv.lock pins it (the version of mmcv-lite), its hash checked."""
    mmcv = uvlock.package('mmcv', version=uvlock.package('mmcv-lite').version)
    url, want = str(mmcv.sdist['url']), str(mmcv.sdist['hash']).split(':', 1)[1]
    path = dest / url.rsplit('/', 1)[1]
    with urllib.request.urlopen(url, timeout=120) as response, open(path, 'wb') as f:
        shutil.copyfileobj(response, f)
    if hashlib.sha256(path.read_bytes()).hexdigest() != want:
        raise SetupError(f'{path.name} does not match the hash in uv.lock', 'a proxy or mirror serves other files '
                         'than the index: use the index itself')
    with tarfile.open(path) as tar:
        tar.extractall(dest, filter='data')
    return dest / path.name[:-len('.tar.gz')]


def build(settings: Settings, uv: Path, python: Path, work: Path, ops: str, compile_ops: bool) -> Path:
    """The mmcv wheel built by ``python``'s pip with the pinned build tools; returns it."""
    src = fetch_sdist(work)
    std = cxx_standard(settings, python) if compile_ops else 'c++17'
    text = (src / 'setup.py').read_text(encoding='utf-8')
    if not re.search(r'-std=c\+\+1[47]', text):
        raise SetupError(f"{src.name}'s setup.py names no -std=c++14/17 flag: the C++ standard patch no longer "
                         'applies', f'report this with {src / "setup.py"}')
    (src / 'setup.py').write_text(re.sub(r'-std=c\+\+1[47]', f'-std={std}', text), encoding='utf-8')
    tools = work / 'build-tools'
    run_uv(uv, settings, 'installing the pinned build tools (requirements/build.txt)', 'pip', 'install', '-q',
           '--python', str(python), '--target', str(tools), '-c', str(BUILD), 'setuptools', 'wheel', 'ninja')
    env = child_env(PYTHONPATH=str(tools), PATH=f'{tools / "bin"}{os.pathsep}{os.environ["PATH"]}',
                    MMCV_WITH_OPS='1', FORCE_CUDA='1' if ops.startswith('cuda') else '0',
                    MAX_JOBS=str(settings.max_jobs))
    if compile_ops:
        say(f'compiling {src.name} (ops: {ops}, {std}, {settings.max_jobs} jobs): ~10-30 min on 2 cores, once')
    log = settings.cache / 'logs' / f'mmcv-build-{ops}.log'
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, 'w', encoding='utf-8') as f:
        proc = subprocess.run([str(python), '-m', 'pip', 'wheel', '-v', '--no-build-isolation', '--no-deps', '-w',
                               str(work / 'out'), '.'], cwd=src, env=env, stdout=f, stderr=subprocess.STDOUT)
    wheels = sorted((work / 'out').glob('mmcv-*.whl'))
    if proc.returncode or not wheels:
        lines = log.read_text(encoding='utf-8', errors='replace').splitlines()
        for line in ([x for x in lines if re.search(r'error:|Error|No space left|Killed|fatal', x)] or lines)[-15:]:
            print(f'    {line}', file=sys.stderr)
        raise SetupError(f'the mmcv build failed (full log: {log})', "'No space left': free disk space or set TMPDIR; "
                         "'Killed': MAX_JOBS=1; else g++ >= 10 and Python's headers are needed")
    return wheels[0]


def cxx_standard(settings: Settings, python: Path) -> str:
    if shutil.which(settings.cxx.split()[0]) is None:
        raise SetupError(f'no C++ compiler ({settings.cxx}) found; MMCV=full compiles mmcv',
                         'apt-get install -y build-essential python3-dev, or use the default MMCV=lite (no compiler)')
    proc = subprocess.run([str(python), str(CXX_PROBE)], capture_output=True, text=True, env=child_env())
    if proc.returncode:
        raise SetupError(f"torch's headers compile with neither C++17 nor C++20: {proc.stderr.strip()}",
                         f"a newer compiler is needed (g++ >= 10): check '{settings.cxx} --version'")
    return proc.stdout.strip()


def install(settings: Settings, uv: Path) -> None:
    """The cached (else built) compiled mmcv for the environment's torch, installed in mmcv-lite's place."""
    check_python(sys.version_info[:2])
    code = ('import json, sys, torch; print(json.dumps([torch.__version__.split("+")[0], torch.version.cuda, '
            'torch.cuda.is_available(), "%d.%d" % sys.version_info[:2]]))')
    torch_version, cuda, available, python = json.loads(subprocess.run(
        [str(settings.python), '-c', code], capture_output=True, text=True, check=True, env=child_env()).stdout)
    ops = compiled_ops_target(settings, cuda, available)
    folder = settings.cache / 'wheels' / wheel_key(uvlock.package('mmcv-lite').version, torch_version, python, ops)
    wheel = cached_wheel(folder)
    if wheel is None:
        with tempfile.TemporaryDirectory(prefix='inline_dense-mmcv-') as work:
            wheel = store_wheel(build(settings, uv, settings.python, Path(work), ops, compile_ops=True), folder)
        say(f'cached {wheel}')
    run_uv(uv, settings, 'installing the compiled mmcv', 'pip', 'install', '-q', '--python', str(settings.python),
           '--no-deps', str(wheel))


def rehearse(settings: Settings, uv: Path) -> None:
    """A first build's steps up to the compile, in a throw-away environment with empty caches."""
    if settings.flavour != 'full':
        raise SetupError('--check-first-time rehearses the compiled mmcv (MMCV=full); the default needs no build',
                         'run MMCV=full bash tools/setup_env.sh --check-first-time')
    check_python(sys.version_info[:2])
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix='inline_dense-check-') as tmp:
        work = Path(tmp)
        os.environ['UV_CACHE_DIR'] = str(work / 'uv-cache')
        python = work / 'venv' / 'bin' / 'python'
        run_uv(uv, settings, 'creating a throw-away environment', 'venv', '-q', '--python', sys.executable,
               str(work / 'venv'))
        run_uv(uv, settings, "installing uv.lock's pip", 'pip', 'install', '-q', '--python', str(python),
               f'pip=={uvlock.package("pip").version}')
        say(f'fetch the mmcv sdist uv.lock pins, prepare and build it with the pinned build tools in {work} '
            '(no torch there: nothing compiles)')
        wheel = build(settings, uv, python, work, 'cpu', compile_ops=False)
        say(f'first-time check passed in {time.time() - t0:.0f} s: {wheel.name}')
