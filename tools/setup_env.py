"""The environment setup behind ``bash tools/setup_env.sh`` (standard library only).

    bash tools/setup_env.sh                     set up (or check) the environment; safe to repeat
    bash tools/setup_env.sh --plan              say what a setup would do now; change nothing
    bash tools/setup_env.sh --check-first-time  rehearse a first setup's index (and, with
                                                MMCV=full, its mmcv build) steps in a throw-away
                                                environment with an empty pip cache
    bash tools/setup_env.sh --update-lock       re-resolve requirements/lock.txt from the index

mmcv flavour, ``MMCV=lite`` (default) or ``MMCV=full``:
  lite  mmcv-lite 2.1.0, a pure-Python wheel: no compiler; ``mmcv.ops`` runs on inline_dense's
        stand-in for the compiled ops (nms, roi_align, focal losses from torchvision / torch,
        on CPU and CUDA alike).
  full  mmcv 2.1.0 compiled from source with all its ops (DCN, CARAFE, ...): needs g++ and
        Python's headers, ~10-30 min on 2 cores once per torch/Python/ops/build tools, then
        cached. CUDA ops need a GPU and a CUDA toolkit (nvcc) matching torch's.

Environment: $INLINE_DENSE_VENV when set (made there if missing; e.g. a second environment on
another Python beside .venv), else the active virtual environment ($VIRTUAL_ENV), else .venv/ in
this checkout.
Python: 3.11, 3.12 or 3.13 (the versions requirements/lock.txt is resolved for; its numpy and torch
have no releases for 3.9 or 3.10). MMCV=full: 3.11 or 3.12 (mmcv 2.1.0's setup.py fails on 3.13).
Knobs: PYTHON (interpreter for a new environment), INLINE_DENSE_VENV, MMCV, FORCE_CUDA=1/0 (full: CUDA ops or not;
default: when torch sees a GPU and nvcc exists), MAX_JOBS (full: compile jobs),
SETUP_FORCE=1 (re-check everything with pip), INLINE_DENSE_CACHE (default
~/.cache/inline_dense: compiled mmcv wheels, and logs of failed steps).

Every version comes from requirements/lock.txt (exact pins, used as constraints) and
requirements/build.txt (build tools, also inside pip's isolated build environments).
"""
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / 'requirements' / 'lock.txt'
BUILD = ROOT / 'requirements' / 'build.txt'
CXX_PROBE = ROOT / 'tools' / 'torch_cxx_std.py'
# The Pythons requirements/lock.txt resolves for (all of it as wheels; checked by pip --dry-run on each).
SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))
# MMCV=full builds mmcv 2.1.0's sdist, whose setup.py reads its version through exec() into
# locals(): Python 3.13 no longer updates locals() that way (PEP 667), so the build fails there.
FULL_PYTHONS = ((3, 11), (3, 12))
STACK = ('torch', 'torchvision', 'mmengine', 'mmdet', 'mmsegmentation')
# Besides the stack: what the package, its tools and its tests import. setuptools < 81:
# mmengine 0.10.7 resolves 'mmdet::' / 'mmseg::' config paths with pkg_resources.
EXTRAS = ('setuptools', 'timm', 'segmentation-models-pytorch', 'pycocotools', 'pytest', 'pytest-timeout',
          'pytest-xdist', 'ftfy', 'regex', 'ruff',
          'onnx', 'onnxruntime', 'onnxscript')  # the last three: tools/export_onnx.py and its tests
FLAVOURS = {'lite': 'mmcv-lite', 'full': 'mmcv'}
STAMP_NAME = '.inline_dense_setup'
# What the finished environment must import: stock OpenMMLab entry points and the three ops.
IMPORT_CHECK = ('import torch, mmcv, mmcv.ops, mmdet, mmseg, inline_dense\n'
                'from mmdet.apis import DetInferencer\n'
                'from mmseg.apis import MMSegInferencer\n'
                'from mmcv.ops import nms, roi_align, sigmoid_focal_loss\n'
                'b = torch.tensor([[0., 0., 4., 4.], [1., 1., 5., 5.]])\n'
                'assert nms(b, torch.tensor([.9, .8]), .3)[1].tolist() == [0]\n'
                'import mmcv._ext as ext\n'
                "print('[setup] ok: torch', torch.__version__, '| mmcv', mmcv.__version__,"
                " '| mmdet', mmdet.__version__, '| mmseg', mmseg.__version__,"
                " '| mmcv ops:', 'inline_dense stand-in (torchvision)' if getattr(ext, 'IS_STAND_IN', False)"
                " else 'compiled')\n")


class SetupError(Exception):
    """A failure with what went wrong and what to do (``hints``)."""

    def __init__(self, message: str, *hints: str):
        super().__init__(message)
        self.hints = hints


def say(message: str) -> None:
    print(f'[setup] {message}', flush=True)


# ----------------------------------------------------------------------------- pins
def read_pins(path: Path = LOCK) -> Dict[str, str]:
    """``name==version`` lines of a pin file, by normalised name."""
    pins = {}
    for line in path.read_text(encoding='utf-8').splitlines():
        line = line.split('#')[0].strip()
        if line:
            name, _, version = line.partition('==')
            if not version:
                raise SetupError(f'{path}: "{line}" is not an exact pin (name==version)')
            pins[normalise(name)] = version.strip()
    return pins


def normalise(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def requested(flavour: str, pins: Dict[str, str]) -> List[str]:
    """The exact requirements a setup of this flavour installs (besides this package)."""
    names = list(STACK) + [FLAVOURS[flavour]] + list(EXTRAS)
    missing = [n for n in names if normalise(n) not in pins]
    if missing:
        raise SetupError(f'requirements/lock.txt pins no version for {", ".join(missing)}',
                         'add the pins, or regenerate the file: bash tools/setup_env.sh --update-lock')
    return [f'{n}=={pins[normalise(n)]}' for n in names]


def digest(*parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.read_bytes() if isinstance(part, Path) else str(part).encode())
        h.update(b'\0')
    return h.hexdigest()[:16]


# ----------------------------------------------------------------------------- the decision
@dataclasses.dataclass
class State:
    """What the decision looks at; read from the machine by :func:`observe`, or made by tests."""
    flavour: str                    # 'lite' or 'full'
    stamp: Optional[str]            # the environment's stamp file, None when absent
    env_stamp: str                  # the stamp a finished setup of the current inputs writes
    force: bool = False             # SETUP_FORCE=1
    mmcv_wheel: Optional[Path] = None  # full: the cached compiled wheel for this key, if any


@dataclasses.dataclass
class Plan:
    action: str      # ready | install | cached-mmcv | compile-mmcv
    reason: str


def decide(state: State) -> Plan:
    """The one decision both ``--plan`` and the setup act on."""
    if not state.force and state.stamp == state.env_stamp:
        return Plan('ready', 'the environment was set up from these exact inputs; only an import check runs')
    if state.flavour == 'lite':
        return Plan('install', 'pinned wheels from the index (pip cache aside, nothing is kept between setups)')
    if state.mmcv_wheel is not None:
        return Plan('cached-mmcv', f'the compiled mmcv wheel is cached: {state.mmcv_wheel}')
    return Plan('compile-mmcv', 'no compiled mmcv wheel cached for this torch/Python/ops/build tools: compile it')


def env_stamp(flavour: str, venv: Path) -> str:
    """Changes exactly when what the environment should hold changes."""
    return f'{ROOT} {flavour} ' + digest(LOCK, ROOT / 'requirements' / 'runtime.txt', ROOT / 'setup.py',
                                         ROOT / 'inline_dense_mmcv_hook.pth', Path(__file__), flavour, str(venv))


def compiled_ops_target(torch_cuda: Optional[str], cuda_available: bool) -> str:
    """'cpu' or 'cuda<version>': what a compiled mmcv gets. FORCE_CUDA wins; otherwise CUDA ops
    when torch sees a GPU and nvcc exists (both are needed to build them)."""
    force = os.environ.get('FORCE_CUDA', '')
    cuda = force == '1' or (force == '' and cuda_available and shutil.which('nvcc') is not None)
    return f'cuda{torch_cuda}' if cuda and torch_cuda else 'cpu'


def mmcv_wheel_key(mmcv_version: str, torch_version: str, python: str, ops: str) -> str:
    """The compiled wheel's cache key: only what changes the build (not this script's text)."""
    return f'mmcv-{mmcv_version}_torch-{torch_version}_py{python}_{ops}_{digest(BUILD, CXX_PROBE)}'


def cache_dir() -> Path:
    default = Path(os.environ.get('XDG_CACHE_HOME', Path.home() / '.cache')) / 'inline_dense'
    return Path(os.environ.get('INLINE_DENSE_CACHE', default))


def cached_wheel(folder: Path) -> Optional[Path]:
    wheels = sorted(folder.glob('mmcv-*.whl'))
    return wheels[0] if wheels else None


def store_wheel(wheel: Path, folder: Path) -> Path:
    """Copies ``wheel`` into ``folder`` atomically. Other keys' folders are left alone: two
    recipes (e.g. two checkouts) on one machine keep their builds."""
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / '.partial'
    shutil.copy(wheel, partial)
    final = folder / wheel.name
    os.replace(partial, final)
    return final


# ----------------------------------------------------------------------------- pip steps
class Pip:
    """Runs pip in one interpreter; a failure shows pip's last lines and names its cause."""

    def __init__(self, python: Path, logs: Path):
        self.python, self.logs, self.count = python, logs, 0

    def __call__(self, what: str, *args: str, env: Optional[dict] = None) -> str:
        self.count += 1
        proc = subprocess.run([str(self.python), '-m', 'pip', '--disable-pip-version-check', *args],
                              capture_output=True, text=True, env=env)
        if proc.returncode == 0:
            return proc.stdout
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f'pip-step-{self.count}.log'
        log.write_text(proc.stdout + proc.stderr, encoding='utf-8')
        tail = [line for line in (proc.stdout + proc.stderr).splitlines() if not line.startswith('WARNING: Location')]
        print(f"[setup] last lines of pip's output (all of it: {log}):", file=sys.stderr)
        for line in tail[-25:]:
            print(f'    {line}', file=sys.stderr)
        raise explain_pip_failure(what, proc.stdout + proc.stderr, log)


def explain_pip_failure(what: str, output: str, log: Path) -> SetupError:
    """The cause of a failed pip step, from its output."""
    if re.search(r'Traceback \(most recent call last\)|subprocess-exited-with-error|metadata-generation-failed',
                 output):
        errors = re.findall(r'^\s*([A-Za-z_.]*(?:Error|Exception):.*)$', output, re.M)
        return SetupError(f'{what}: a Python error in a build step (not a network problem): '
                          f'{errors[-1].strip() if errors else "see the output above"}',
                          'the build tools are pinned in requirements/build.txt; if one of them no longer works '
                          'here, report it with the output above')
    if re.search(r'ResolutionImpossible|conflicting dependencies', output):
        return SetupError(f'{what}: the pinned versions conflict (see above)',
                          'an active environment may hold packages that clash with requirements/lock.txt: '
                          'try without VIRTUAL_ENV (this script then makes .venv, or $INLINE_DENSE_VENV)')
    if re.search(r'NewConnectionError|Max retries exceeded|Name or service not known|Temporary failure in name '
                 r'resolution|Connection (refused|reset)|Read timed out|SSLError|ProxyError|Network is unreachable',
                 output, re.I):
        return SetupError(f'{what}: the package index could not be reached',
                          'check network access to PyPI (behind a proxy: set HTTPS_PROXY), then run this again')
    if re.search(r'No matching distribution|Could not find a version', output):
        return SetupError(f'{what}: the index has no matching release (see above)',
                          'a pinned release may be missing for this Python/platform; the pins are in '
                          'requirements/lock.txt')
    if 'No space left on device' in output:
        return SetupError(f'{what}: the disk is full', 'free disk space (df -h), then run this again')
    return SetupError(f'{what} failed (see pip\'s output above)',
                      f'run this again; if it fails the same way, report it with {log}')


def run_python(python: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), '-c', code, *args], capture_output=True, text=True)


def installed_version(python: Path, dist: str) -> Optional[str]:
    proc = run_python(python, 'import importlib.metadata as m, sys\ntry: print(m.version(sys.argv[1]))\n'
                      'except m.PackageNotFoundError: pass', dist)
    return proc.stdout.strip() or None


def torch_facts(python: Path) -> Optional[dict]:
    proc = run_python(python, 'import json, torch; print(json.dumps({"version": torch.__version__.split("+")[0], '
                      '"cuda": torch.version.cuda, "available": torch.cuda.is_available()}))')
    return json.loads(proc.stdout) if proc.returncode == 0 else None


# ----------------------------------------------------------------------------- the compiled mmcv
def build_mmcv(pip: Pip, python: Path, version: str, ops: str, work: Path, logs: Path, compile_ops: bool) -> Path:
    """mmcv ``version`` built from its sdist with the pinned build tools; returns the wheel.

    With ``compile_ops`` false only the Python part builds (the first-time rehearsal)."""
    pip(f'fetching and preparing the mmcv {version} source', 'download', '-q', '--no-deps', '--no-binary', ':all:',
        '--build-constraint', str(BUILD), f'mmcv=={version}', '-d', str(work))
    shutil.unpack_archive(str(work / f'mmcv-{version}.tar.gz'), str(work))
    src = work / f'mmcv-{version}'
    std = cxx_standard(python) if compile_ops else 'c++17'
    setup_py = src / 'setup.py'
    text = setup_py.read_text(encoding='utf-8')
    if not re.search(r'-std=c\+\+1[47]', text):
        raise SetupError(f"mmcv {version}'s setup.py names no -std=c++14/17 flag: the C++ standard patch no longer "
                         'applies', f'report this with {setup_py}')
    # mmcv 2.1.0 hard-codes an older standard than torch >= 2.10's headers need.
    setup_py.write_text(re.sub(r'-std=c\+\+1[47]', f'-std={std}', text), encoding='utf-8')
    tools = work / 'build-tools'
    pip('installing the pinned build tools (requirements/build.txt)', 'install', '-q', '--no-warn-conflicts',
        '--target', str(tools), '-c', str(BUILD), 'setuptools', 'wheel', 'ninja')
    out = work / 'out'
    log = logs / f'mmcv-build-{ops}.log'
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(tools), PATH=f'{tools / "bin"}{os.pathsep}{os.environ["PATH"]}',
               MMCV_WITH_OPS='1', FORCE_CUDA='1' if ops.startswith('cuda') else '0',
               MAX_JOBS=os.environ.get('MAX_JOBS', str(os.cpu_count() or 1)))
    if compile_ops:
        say(f'compiling mmcv {version} (ops: {ops}, {std}, {env["MAX_JOBS"]} jobs); ~10-30 min on 2 cores, once')
    with open(log, 'w', encoding='utf-8') as f:
        proc = subprocess.run([str(python), '-m', 'pip', '--disable-pip-version-check', 'wheel', '-v',
                               '--no-build-isolation', '--no-deps', '-w', str(out), '.'],
                              cwd=src, env=env, stdout=f, stderr=subprocess.STDOUT)
    wheels = sorted(out.glob('mmcv-*.whl'))
    if proc.returncode or not wheels:
        lines = log.read_text(encoding='utf-8', errors='replace').splitlines()
        errors = [line for line in lines if re.search(r'error:|Error|No space left|Killed|fatal', line)] or lines
        for line in errors[-15:]:
            print(f'    {line}', file=sys.stderr)
        raise SetupError(f'the mmcv build failed; full log: {log}',
                         "'No space left on device': free disk space (or set TMPDIR to a larger disk), run again",
                         "'Killed' / 'internal compiler error': not enough memory, run again with MAX_JOBS=1",
                         'other compiler errors: needs g++ >= 10 and Python headers; send the log with a bug report')
    return wheels[0]


def cxx_standard(python: Path) -> str:
    cxx = os.environ.get('CXX', 'g++').split()[0]
    if shutil.which(cxx) is None:
        raise SetupError(f'no C++ compiler ({cxx}) found; MMCV=full compiles mmcv',
                         'Debian/Ubuntu: apt-get install -y build-essential python3-dev; or use the default '
                         'MMCV=lite, which needs no compiler')
    proc = subprocess.run([str(python), str(CXX_PROBE)], capture_output=True, text=True)
    if proc.returncode:
        raise SetupError(f"torch's headers compile with neither C++17 nor C++20 using {cxx}: {proc.stderr.strip()}",
                         f"a newer compiler is needed (g++ >= 10 for C++20): check '{cxx} --version'; Python's "
                         'headers are needed too (apt-get install python3-dev)')
    return proc.stdout.strip()


# ----------------------------------------------------------------------------- the setup
@dataclasses.dataclass
class Context:
    venv: Path
    flavour: str
    pins: Dict[str, str]
    cache: Path

    @property
    def python(self) -> Path:
        return self.venv / 'bin' / 'python'

    @property
    def stamp_file(self) -> Path:
        return self.venv / STAMP_NAME


def chosen_venv() -> Path:
    """$INLINE_DENSE_VENV, else the active environment, else .venv in this checkout."""
    named = os.environ.get('INLINE_DENSE_VENV') or os.environ.get('VIRTUAL_ENV')
    return Path(named).absolute() if named else ROOT / '.venv'


def owned_by_setup(venv: Path) -> bool:
    """Environments this setup makes and may ask to delete (not a user's active one)."""
    named = os.environ.get('INLINE_DENSE_VENV')
    return venv == ROOT / '.venv' or bool(named and venv == Path(named).absolute())


def check_python(version: Tuple[int, int], flavour: str = 'lite') -> None:
    """Refuses a Python that the lock holds no wheels for, or that cannot build mmcv 2.1.0
    (``flavour`` 'full'), before pip fails on it."""
    if version not in SUPPORTED_PYTHONS:
        names = ', '.join('%d.%d' % v for v in SUPPORTED_PYTHONS)
        newest = '%d.%d' % SUPPORTED_PYTHONS[-1]
        raise SetupError(f'Python {version[0]}.{version[1]} is not supported by the pinned setup: '
                         f'requirements/lock.txt is resolved for Python {names}',
                         f'use one of those: PYTHON=python{newest} bash tools/setup_env.sh (with an existing '
                         '.venv on another Python, also set INLINE_DENSE_VENV to a new folder, or delete .venv)')
    if flavour == 'full' and version not in FULL_PYTHONS:
        names = ' or '.join('%d.%d' % v for v in FULL_PYTHONS)
        raise SetupError(f"MMCV=full does not build on Python {version[0]}.{version[1]}: mmcv 2.1.0's setup.py reads "
                         "its version through exec() and locals(), which Python 3.13 changed (PEP 667): "
                         "KeyError: '__version__'",
                         'use the default MMCV=lite here (no compiler; the stand-in serves nms, roi_align and the '
                         f'focal losses), or Python {names} for MMCV=full: '
                         f'MMCV=full PYTHON=python{"%d.%d" % FULL_PYTHONS[-1]} bash tools/setup_env.sh')


def make_context(flavour: str) -> Context:
    return Context(venv=chosen_venv(), flavour=flavour, pins=read_pins(), cache=cache_dir())


def observe(ctx: Context) -> State:
    """The state :func:`decide` acts on, read from this machine."""
    stamp = ctx.stamp_file.read_text(encoding='utf-8').strip() if ctx.stamp_file.is_file() else None
    state = State(flavour=ctx.flavour, stamp=stamp, env_stamp=env_stamp(ctx.flavour, ctx.venv),
                  force=os.environ.get('SETUP_FORCE') == '1')
    if ctx.flavour == 'full':
        state.mmcv_wheel = cached_wheel(ctx.cache / 'wheels' / mmcv_key_for(ctx)[0])
    return state


def mmcv_key_for(ctx: Context) -> Tuple[str, str]:
    """The compiled wheel's cache key and its ops target, from the environment's torch (or the pin)."""
    facts = torch_facts(ctx.python) if ctx.python.exists() else None
    torch_version = facts['version'] if facts else ctx.pins['torch']
    ops = compiled_ops_target(facts['cuda'] if facts else None, bool(facts and facts['available']))
    return mmcv_wheel_key(ctx.pins['mmcv'], torch_version, '%d.%d' % sys.version_info[:2], ops), ops


def setup(ctx: Context) -> None:
    t0 = time.time()
    if not ctx.python.exists():
        say(f'creating virtual environment {ctx.venv} (Python {sys.version.split()[0]})')
        proc = subprocess.run([sys.executable, '-m', 'venv', str(ctx.venv)], capture_output=True, text=True)
        if proc.returncode:
            raise SetupError(f'could not create a virtual environment with {sys.executable}: {proc.stderr.strip()}',
                             'Debian/Ubuntu: apt-get install -y python3-venv, then run this again')
    state = observe(ctx)
    plan = decide(state)
    if plan.action == 'ready':
        proc = run_python(ctx.python, IMPORT_CHECK)
        if proc.returncode == 0:
            say(f'already set up in {ctx.venv} ({ctx.flavour}); nothing to do in {time.time() - t0:.0f} s')
            return
        say('set up before, but the import check fails now: installing again')
        plan = decide(dataclasses.replace(state, force=True))
    ctx.stamp_file.unlink(missing_ok=True)
    free = shutil.disk_usage(ctx.venv).free / 2 ** 30
    if free < 3:
        raise SetupError(f'only {free:.1f} GiB free on the disk holding {ctx.venv}',
                         'a first install needs about 7 GiB (torch is a CUDA build): free some space, run again')
    pip = Pip(ctx.python, ctx.cache / 'logs')
    pip_pin = read_pins(BUILD)['pip']
    if installed_version(ctx.python, 'pip') != pip_pin:
        pip(f'installing pip {pip_pin}', 'install', '-q', f'pip=={pip_pin}')
    work = tempfile.TemporaryDirectory(prefix='inline_dense-setup-')
    constraints = constraints_for(ctx, Path(work.name))
    other = {'lite': 'mmcv', 'full': 'mmcv-lite'}[ctx.flavour]
    if installed_version(ctx.python, other):
        # Both distributions own the 'mmcv' folder: the one leaving must go first.
        say(f'removing {other} (switching to MMCV={ctx.flavour})')
        pip(f'uninstalling {other}', 'uninstall', '-y', '-q', other)
    reqs = requested(ctx.flavour, ctx.pins)
    if ctx.flavour == 'full':
        wheel = install_compiled_mmcv(ctx, pip, plan, constraints)
        reqs = [wheel if r.startswith('mmcv==') else r for r in reqs]
    say(f'installing {", ".join(r.split("/")[-1] for r in reqs[:6])} and {len(reqs) - 6} more '
        '(torch is a CUDA build: ~3 GiB the first time)')
    pip('installing the pinned stack', 'install', '-q', '-c', str(constraints), '--build-constraint', str(BUILD), *reqs)
    # Editable, without build isolation: pip refuses --build-constraint there, and the
    # environment's own (pinned) setuptools builds it.
    pip(f'installing inline_dense from {ROOT}', 'install', '-q', '--no-deps', '--use-pep517', '--no-build-isolation',
        '-e', str(ROOT))
    # An editable install skips build outputs, so the .pth the wheel carries is written here.
    proc = run_python(ctx.python, 'import inline_dense_mmcv_hook as h; print(h.install_pth())')
    if proc.returncode:
        raise SetupError(f'could not install inline_dense_mmcv_hook.pth: {proc.stderr.strip()}')
    check = subprocess.run([str(ctx.python), '-m', 'pip', '--disable-pip-version-check', 'check'],
                           capture_output=True, text=True)
    if check.returncode:
        print(check.stdout + check.stderr, file=sys.stderr)
        if owned_by_setup(ctx.venv):
            raise SetupError(f'pip reports conflicting requirements in {ctx.venv} (above)',
                             f'delete {ctx.venv} and run this again')
        say(f'WARNING: pip reports conflicts in your environment {ctx.venv} (above); the stack may still work')
    proc = run_python(ctx.python, IMPORT_CHECK)
    print(proc.stdout, end='')
    if proc.returncode:
        print(proc.stderr, file=sys.stderr)
        raise SetupError('the stack was installed but does not import (above)', 'run: SETUP_FORCE=1 bash '
                         'tools/setup_env.sh')
    work.cleanup()
    ctx.stamp_file.write_text(state.env_stamp + '\n', encoding='utf-8')
    say(f'done in {time.time() - t0:.0f} s; environment: {ctx.venv} (activate: source {ctx.venv}/bin/activate)')


def constraints_for(ctx: Context, folder: Path) -> Path:
    """The lock as pip constraints (a file in ``folder``), keeping a torch that the user installed
    before (any version)."""
    pins = dict(ctx.pins)
    have = installed_version(ctx.python, 'torch')
    if have and have != pins['torch']:
        say(f'keeping your torch {have} (the pin is {pins["torch"]}); its own requirements are left to it')
        for name in ('torch', 'torchvision', *torch_requirements(ctx.python)):
            pins.pop(name, None)
        pins['torch'] = have
    path = folder / 'constraints.txt'
    path.write_text(''.join(f'{name}=={version}\n' for name, version in pins.items()), encoding='utf-8')
    return path


def torch_requirements(python: Path) -> List[str]:
    proc = run_python(python, 'import importlib.metadata as m; print("\\n".join(m.requires("torch") or []))')
    return [normalise(re.split(r'[\s;<>=!~\[(]', line, maxsplit=1)[0]) for line in proc.stdout.splitlines() if line]


def install_compiled_mmcv(ctx: Context, pip: Pip, plan: Plan, constraints: Path) -> str:
    """Torch first (the build compiles against it), then the compiled wheel, cached by key."""
    pip('installing torch', 'install', '-q', '-c', str(constraints), f'torch=={ctx.pins["torch"]}',
        f'torchvision=={ctx.pins["torchvision"]}')
    key, ops = mmcv_key_for(ctx)
    folder = ctx.cache / 'wheels' / key
    wheel = cached_wheel(folder)
    if wheel is None:
        with tempfile.TemporaryDirectory(prefix='inline_dense-mmcv-') as work:
            built = build_mmcv(pip, ctx.python, ctx.pins['mmcv'], ops, Path(work), ctx.cache / 'logs',
                               compile_ops=True)
            wheel = store_wheel(built, folder)
        say(f'cached {wheel}')
    else:
        say(f'using the cached compiled mmcv {wheel}')
    return str(wheel)


# ------------------------------------------------------------------------ --plan, --check-first-time, --update-lock
def print_plan(ctx: Context) -> None:
    state = observe(ctx)
    plan = decide(state)
    lines = {'plan': plan.action, 'why': plan.reason, 'mmcv': f'{ctx.flavour} ({FLAVOURS[ctx.flavour]})',
             'environment': str(ctx.venv), 'python': sys.version.split()[0], 'lock': str(LOCK)}
    if ctx.flavour == 'full':
        lines['mmcv-wheels'] = str(ctx.cache / 'wheels' / mmcv_key_for(ctx)[0])
    print(''.join(f'{k}: {v}\n' for k, v in lines.items()), end='')


def resolve(python: Path, pip: Pip, reqs: Sequence[str], constraints: Optional[Path], report: Path) -> List[dict]:
    """What a first setup would install (pip --dry-run from an empty environment)."""
    args = ['install', '-q', '--dry-run', '--ignore-installed', '--report', str(report),
            '--build-constraint', str(BUILD)]
    if constraints:
        args += ['-c', str(constraints)]
    pip('resolving the pinned stack', *args, *reqs)
    return json.loads(report.read_text())['install']


def rehearse(ctx: Context, update_lock: bool) -> None:
    """--check-first-time and --update-lock: a throw-away venv with an empty pip cache."""
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix='inline_dense-check-') as tmp:
        work = Path(tmp)
        os.environ.update(PIP_CACHE_DIR=str(work / 'pip-cache'), PIP_NO_INPUT='1')
        say(f'throw-away environment in {work} (empty pip cache)')
        subprocess.run([sys.executable, '-m', 'venv', str(work / 'venv')], check=True)
        python = work / 'venv' / 'bin' / 'python'
        pip = Pip(python, work / 'logs')
        pip('installing the pinned pip', 'install', '-q', f'pip=={read_pins(BUILD)["pip"]}')
        reqs = requested(ctx.flavour, ctx.pins)
        if update_lock:
            # The stack keeps its versions; what they need, and the extras, are resolved anew.
            fresh = [r if normalise(r.split('==')[0]) in (*STACK, 'mmcv-lite') else r.split('==')[0]
                     for r in requested('lite', ctx.pins)]
            got = resolve(python, pip, [r if r != 'setuptools' else 'setuptools<81' for r in fresh], None,
                          work / 'report.json')
            write_lock(got, ctx.pins['mmcv'])
            return
        step = 1
        if ctx.flavour == 'full':
            say(f'{step}. fetch the mmcv {ctx.pins["mmcv"]} sdist, prepare and build it with the pinned build tools '
                '(no torch here: nothing compiles)')
            wheel = build_mmcv(pip, python, ctx.pins['mmcv'], 'cpu', work / 'mmcv', work / 'logs', compile_ops=False)
            reqs = [str(wheel) if r.startswith('mmcv==') else r for r in reqs]
            step += 1
        say(f'{step}. resolve every pin for Python {sys.version_info[0]}.{sys.version_info[1]} against the index '
            '(pip --dry-run)')
        constraints = constraints_for(Context(work / 'venv', ctx.flavour, ctx.pins, ctx.cache), work)
        got = resolve(python, pip, reqs, constraints, work / 'report.json')
        bad = [f"{normalise(i['metadata']['name'])} {i['metadata']['version']} "
               f"(lock: {ctx.pins.get(normalise(i['metadata']['name']), 'not pinned')})"
               for i in got if ctx.pins.get(normalise(i['metadata']['name'])) != i['metadata']['version']
               and not str(i.get('download_info', {}).get('url', '')).startswith('file:')]
        if bad:
            raise SetupError('the resolved stack and the lock file disagree: ' + '; '.join(bad),
                             'update the lock: bash tools/setup_env.sh --update-lock')
        say(f'   {len(got)} packages resolve, all as locked')
    say(f'first-time check ({ctx.flavour}) passed in {time.time() - t0:.0f} s')


def write_lock(resolved: List[dict], mmcv_version: str) -> None:
    pins = {normalise(i['metadata']['name']): i['metadata']['version'] for i in resolved}
    pins['mmcv'] = mmcv_version
    head = [line for line in LOCK.read_text(encoding='utf-8').splitlines() if line.startswith('#')]
    LOCK.write_text('\n'.join(head + [f'{n}=={v}' for n, v in sorted(pins.items())]) + '\n', encoding='utf-8')
    say(f'wrote {len(pins)} pins to {LOCK}')


def main(argv: Sequence[str]) -> int:
    modes = {'': 'setup', '--plan': 'plan', '--check-first-time': 'check', '--update-lock': 'lock'}
    arg = argv[0] if argv else ''
    if arg in ('-h', '--help'):
        print(__doc__)
        return 0
    if len(argv) > 1 or arg not in modes:
        print(f'tools/setup_env.sh: unknown option {" ".join(argv)} (see --help)', file=sys.stderr)
        return 2
    flavour = os.environ.get('MMCV', 'lite')
    try:
        if flavour not in FLAVOURS:
            raise SetupError(f'MMCV={flavour} is not a flavour', 'use MMCV=lite (default, no compiler) or MMCV=full '
                             '(mmcv compiled with all its ops)')
        check_python(sys.version_info[:2], flavour)
        ctx = make_context(flavour)
        mode = modes[arg]
        if mode == 'plan':
            print_plan(ctx)
        elif mode in ('check', 'lock'):
            rehearse(ctx, update_lock=mode == 'lock')
        else:
            setup(ctx)
    except SetupError as exc:
        print(f'\n[setup] ERROR: {exc}', file=sys.stderr)
        for hint in exc.hints:
            print(f'[setup]   -> {hint}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
