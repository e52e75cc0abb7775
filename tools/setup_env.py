"""The environment setup behind ``bash tools/setup_env.sh`` (standard library only).

    bash tools/setup_env.sh                     set up (or check) the environment; safe to repeat
    bash tools/setup_env.sh --plan              say what a setup would do now; change nothing
    bash tools/setup_env.sh --check-first-time  rehearse a first setup's index (and, with
                                                MMCV=full, its mmcv build) steps in a throw-away
                                                environment with an empty uv cache
    bash tools/setup_env.sh --update-lock       re-resolve the stack's lock with uv's resolver

uv does the work: it creates the environment and installs the stack's lock (exact pins with
hashes, verified). uv itself comes from the package index (a binary wheel, pinned in
requirements/build.txt, kept in $INLINE_DENSE_CACHE/uv/<version>); $UV names another uv binary.
What is left here: the choice of lock, the compiled mmcv (MMCV=full) and its cache, the mmcv._ext
stand-in hook (.pth), the import check and errors that say what to do.

OpenMMLab stack, ``STACK=openmmlab`` (default) or ``STACK=onedl``:
  openmmlab  mmengine 0.10.7, mmcv-lite 2.1.0, mmdet 3.3.0, mmsegmentation 1.2.2 (the last
             OpenMMLab releases); lock: requirements/lock.txt, from requirements/openmmlab.in.
  onedl      onedl-mmengine 0.10.12, onedl-mmcv 2.3.6 (built without ops: MMCV_WITH_OPS=0, no
             compiler), onedl-mmdetection 3.5.1 (+ imaug), onedl-mmsegmentation 1.4.2, the
             maintained successors under the same import names; lock: requirements/lock-onedl.txt,
             from requirements/onedl.in.
Both: torch 2.14.1, timm, segmentation-models-pytorch, the test and tool packages
(requirements/common.in). A pin is added to requirements/common.in (both stacks) or to one
stack's .in file, then: STACK=<stack> bash tools/setup_env.sh --update-lock.

mmcv flavour, ``MMCV=lite`` (default) or ``MMCV=full`` (STACK=openmmlab only):
  lite  no compiled ops; ``mmcv.ops`` runs on inline_dense's stand-in for the compiled ops
        (nms, roi_align, focal losses from torchvision / torch, on CPU and CUDA alike).
  full  mmcv 2.1.0 compiled from source with all its ops (DCN, CARAFE, ...): needs g++ and
        Python's headers, ~10-30 min on 2 cores once per torch/Python/ops/build tools, then
        cached. CUDA ops need a GPU and a CUDA toolkit (nvcc) matching torch's.

Environment: $INLINE_DENSE_VENV when set (made there if missing; e.g. a second environment on
another Python beside .venv), else the active virtual environment ($VIRTUAL_ENV), else .venv/ in
this checkout. An environment this setup made is synced to the lock (uv pip sync: what the lock
does not name is removed); an active environment of yours only gets the lock installed into it.
Python: 3.11, 3.12 or 3.13 on both stacks (the versions the locks are resolved for; their numpy
and torch have no releases for 3.9 or 3.10). MMCV=full: 3.11 or 3.12 (mmcv 2.1.0's setup.py fails
on 3.13).
Knobs: STACK, MMCV, PYTHON (interpreter for a new environment), INLINE_DENSE_VENV, UV (a uv binary
to use instead of the pinned one), UV_CACHE_DIR (uv's cache), FORCE_CUDA=1/0 (full: CUDA ops or
not; default: when torch sees a GPU and nvcc exists), MAX_JOBS (full: compile jobs), SETUP_FORCE=1
(install again), INLINE_DENSE_CACHE (default ~/.cache/inline_dense: uv, compiled mmcv wheels, and
logs of failed steps).
"""
import dataclasses
import hashlib
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
REQ = ROOT / 'requirements'
LOCK = REQ / 'lock.txt'  # the default stack's lock
BUILD = REQ / 'build.txt'
CXX_PROBE = ROOT / 'tools' / 'torch_cxx_std.py'
# The Pythons the locks resolve for (uv pip compile --universal --python-version 3.11; every
# package a wheel on each, checked by a setup and the toy demo on each).
SUPPORTED_PYTHONS = ((3, 11), (3, 12), (3, 13))
# MMCV=full builds mmcv 2.1.0's sdist, whose setup.py reads its version through exec() into
# locals(): Python 3.13 no longer updates locals() that way (PEP 667), so the build fails there.
FULL_PYTHONS = ((3, 11), (3, 12))
FLAVOURS = ('lite', 'full')
STAMP_NAME = '.inline_dense_setup'


@dataclasses.dataclass(frozen=True)
class Stack:
    """One OpenMMLab stack: its lock, the file it is resolved from, and its mmcv."""
    name: str
    lock: Path
    source: Path
    mmcv_dist: str          # the distribution in the lock that provides ``mmcv`` (no compiled ops)
    full: bool              # whether MMCV=full (mmcv compiled from source) is wired for it


STACKS = {
    'openmmlab': Stack('openmmlab', LOCK, REQ / 'openmmlab.in', 'mmcv-lite', full=True),
    'onedl': Stack('onedl', REQ / 'lock-onedl.txt', REQ / 'onedl.in', 'onedl-mmcv', full=False),
}
DEFAULT_STACK = 'openmmlab'
# onedl-mmcv is an sdist: built without its compiled ops, it needs no compiler (and no torch).
BUILD_ENV = {'MMCV_WITH_OPS': '0'}
# What the finished environment must import: stock OpenMMLab entry points and the three ops.
IMPORT_CHECK = ('import torch, mmcv, mmcv.ops, mmdet, mmseg, mmengine, inline_dense\n'
                'from mmdet.apis import DetInferencer\n'
                'from mmseg.apis import MMSegInferencer\n'
                'from mmcv.ops import nms, roi_align, sigmoid_focal_loss\n'
                'b = torch.tensor([[0., 0., 4., 4.], [1., 1., 5., 5.]])\n'
                'assert nms(b, torch.tensor([.9, .8]), .3)[1].tolist() == [0]\n'
                'import mmcv._ext as ext\n'
                "print('[setup] ok: torch', torch.__version__, '| mmengine', mmengine.__version__, '| mmcv',"
                " mmcv.__version__, '| mmdet', mmdet.__version__, '| mmseg', mmseg.__version__,"
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
PIN_LINE = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(==\s*([^\s;\\]+))?')


def read_pins(path: Path = LOCK) -> Dict[str, str]:
    """The ``name==version`` entries of a lock (uv's format: hash lines and markers allowed), by
    normalised name. A name pinned twice under markers (one version per Python) keeps the first."""
    pins: Dict[str, str] = {}
    for line in path.read_text(encoding='utf-8').splitlines():
        line = line.split('#')[0].strip()
        if not line or line.startswith('-'):
            continue
        match = PIN_LINE.match(line)
        if not match or not match.group(3):
            raise SetupError(f'{path}: "{line}" is not an exact pin (name==version)')
        pins.setdefault(normalise(match.group(1)), match.group(3))
    return pins


def normalise(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def lock_without(lock: Path, names: Sequence[str], out: Path) -> Path:
    """``lock`` less the entries (with their hash lines) of ``names``, written to ``out``."""
    drop = {normalise(n) for n in names}
    kept, skipping = [], False
    for line in lock.read_text(encoding='utf-8').splitlines():
        match = PIN_LINE.match(line)
        if match:
            skipping = normalise(match.group(1)) in drop
        elif line.strip() and not line.startswith((' ', '\t', '-')):
            skipping = False
        if not skipping:
            kept.append(line)
    out.write_text('\n'.join(kept) + '\n', encoding='utf-8')
    return out


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
        return Plan('install', 'the locked wheels by uv (uv cache aside, nothing is kept between setups)')
    if state.mmcv_wheel is not None:
        return Plan('cached-mmcv', f'the compiled mmcv wheel is cached: {state.mmcv_wheel}')
    return Plan('compile-mmcv', 'no compiled mmcv wheel cached for this torch/Python/ops/build tools: compile it')


def env_stamp(flavour: str, venv: Path, stack: Stack = STACKS[DEFAULT_STACK]) -> str:
    """Changes exactly when what the environment should hold changes."""
    return f'{ROOT} {stack.name} {flavour} ' + digest(
        stack.lock, REQ / 'runtime.txt', ROOT / 'setup.py', ROOT / 'inline_dense_mmcv_hook.pth', Path(__file__),
        flavour, str(venv))


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


# ----------------------------------------------------------------------------- uv and pip steps
class Tool:
    """Runs one command line tool (uv, or pip in an interpreter); a failure shows the tool's last
    lines and names its cause."""

    def __init__(self, argv: Sequence[str], logs: Path):
        self.argv, self.logs, self.count = list(argv), logs, 0

    def __call__(self, what: str, *args: str, env: Optional[dict] = None) -> str:
        self.count += 1
        proc = subprocess.run([*self.argv, *args], capture_output=True, text=True, env=env)
        if proc.returncode == 0:
            return proc.stdout
        self.logs.mkdir(parents=True, exist_ok=True)
        log = self.logs / f'step-{self.count}.log'
        log.write_text(proc.stdout + proc.stderr, encoding='utf-8')
        tail = [line for line in (proc.stdout + proc.stderr).splitlines() if not line.startswith('WARNING: Location')]
        print(f"[setup] last lines of the output (all of it: {log}):", file=sys.stderr)
        for line in tail[-25:]:
            print(f'    {line}', file=sys.stderr)
        raise explain_pip_failure(what, proc.stdout + proc.stderr, log)


def pip_in(python: Path, logs: Path) -> Tool:
    return Tool([str(python), '-m', 'pip', '--disable-pip-version-check'], logs)


def explain_pip_failure(what: str, output: str, log: Path) -> SetupError:
    """The cause of a failed uv or pip step, from its output."""
    if re.search(r'[Hh]ash mismatch|do not match the hashes|Hash of .* does not match', output):
        return SetupError(f'{what}: a downloaded file does not match the hash in the lock',
                          'a proxy or mirror may serve other files; if the index changed a release, regenerate '
                          'the lock: bash tools/setup_env.sh --update-lock')
    if re.search(r'Traceback \(most recent call last\)|subprocess-exited-with-error|metadata-generation-failed'
                 r'|Failed to build|Build backend failed', output):
        errors = re.findall(r'^\s*([A-Za-z_.]*(?:Error|Exception):.*)$', output, re.M)
        return SetupError(f'{what}: a Python error in a build step (not a network problem): '
                          f'{errors[-1].strip() if errors else "see the output above"}',
                          'the build tools are pinned in requirements/build.txt; if one of them no longer works '
                          'here, report it with the output above')
    if re.search(r'ResolutionImpossible|conflicting dependencies|No solution found', output):
        return SetupError(f'{what}: the pinned versions conflict (see above)',
                          'an active environment may hold packages that clash with the lock: '
                          'try without VIRTUAL_ENV (this script then makes .venv, or $INLINE_DENSE_VENV)')
    if re.search(r'NewConnectionError|Max retries exceeded|Name or service not known|Temporary failure in name '
                 r'resolution|Connection (refused|reset)|Read timed out|SSLError|ProxyError|Network is unreachable'
                 r'|dns error|error sending request|Failed to fetch', output, re.I):
        return SetupError(f'{what}: the package index could not be reached',
                          'check network access to PyPI (behind a proxy: set HTTPS_PROXY), then run this again')
    if re.search(r'No matching distribution|Could not find a version|not found in the package registry'
                 r'|no wheels with a matching', output):
        return SetupError(f'{what}: the index has no matching release (see above)',
                          'a pinned release may be missing for this Python/platform; the pins are in the lock '
                          '(requirements/lock*.txt)')
    if 'No space left on device' in output:
        return SetupError(f'{what}: the disk is full', 'free disk space (df -h), then run this again')
    return SetupError(f'{what} failed (see the output above)',
                      f'run this again; if it fails the same way, report it with {log}')


def find_uv(cache: Path) -> Path:
    """$UV, else the pinned uv in the setup cache, fetched there from the package index (a binary
    wheel) by the pip of this Python or of the Python it was made from."""
    if os.environ.get('UV'):
        return Path(os.environ['UV'])
    version = read_pins(BUILD)['uv']
    folder = cache / 'uv' / version
    exe = folder / 'bin' / 'uv'
    if exe.is_file() and subprocess.run([str(exe), '--version'], capture_output=True).returncode == 0:
        return exe
    partial = cache / 'uv' / f'.partial-{os.getpid()}'
    shutil.rmtree(partial, ignore_errors=True)
    errors = []
    for python in dict.fromkeys([sys.executable, str(Path(sys.base_prefix) / 'bin' / 'python3')]):
        proc = subprocess.run([python, '-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--no-deps',
                               '--only-binary', ':all:', '--target', str(partial), f'uv=={version}'],
                              capture_output=True, text=True)
        if proc.returncode == 0 and (partial / 'bin' / 'uv').is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.replace(partial, folder)
            return exe
        errors.append((proc.stderr.strip().splitlines() or ['no uv binary in the wheel'])[-1])
    raise SetupError(f'uv {version} could not be had from the package index ({errors[-1]}); this setup needs uv',
                     'check network access to PyPI, or install uv yourself and point UV at it: '
                     'UV=/path/to/uv bash tools/setup_env.sh')


def run_python(python: Path, code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), '-c', code, *args], capture_output=True, text=True)


def torch_facts(python: Path) -> Optional[dict]:
    import json
    proc = run_python(python, 'import json, torch; print(json.dumps({"version": torch.__version__.split("+")[0], '
                      '"cuda": torch.version.cuda, "available": torch.cuda.is_available()}))')
    return json.loads(proc.stdout) if proc.returncode == 0 else None


# ----------------------------------------------------------------------------- the compiled mmcv
def build_mmcv(pip: Tool, python: Path, version: str, ops: str, work: Path, logs: Path, compile_ops: bool) -> Path:
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
        proc = subprocess.run([*pip.argv, 'wheel', '-v',
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
    stack: Stack = STACKS[DEFAULT_STACK]

    @property
    def python(self) -> Path:
        return self.venv / 'bin' / 'python'

    @property
    def stamp_file(self) -> Path:
        return self.venv / STAMP_NAME

    @property
    def mmcv_version(self) -> str:
        return self.pins[normalise(self.stack.mmcv_dist)]


def chosen_venv() -> Path:
    """$INLINE_DENSE_VENV, else the active environment, else .venv in this checkout."""
    named = os.environ.get('INLINE_DENSE_VENV') or os.environ.get('VIRTUAL_ENV')
    return Path(named).absolute() if named else ROOT / '.venv'


def owned_by_setup(venv: Path) -> bool:
    """Environments this setup makes, syncs and may ask to delete (not a user's active one)."""
    named = os.environ.get('INLINE_DENSE_VENV')
    return venv == ROOT / '.venv' or bool(named and venv == Path(named).absolute())


def chosen_stack() -> Stack:
    name = os.environ.get('STACK', DEFAULT_STACK)
    if name not in STACKS:
        raise SetupError(f'STACK={name} is not a stack', f'use STACK={" or STACK=".join(STACKS)} '
                         f'(default {DEFAULT_STACK}; docs/installation.md says which to choose)')
    return STACKS[name]


def check_python(version: Tuple[int, int], flavour: str = 'lite', stack: Stack = STACKS[DEFAULT_STACK]) -> None:
    """Refuses a Python that the lock holds no wheels for, or that cannot build mmcv 2.1.0
    (``flavour`` 'full'), before uv fails on it."""
    if version not in SUPPORTED_PYTHONS:
        names = ', '.join('%d.%d' % v for v in SUPPORTED_PYTHONS)
        newest = '%d.%d' % SUPPORTED_PYTHONS[-1]
        raise SetupError(f'Python {version[0]}.{version[1]} is not supported by the pinned setup: '
                         f'{stack.lock.relative_to(ROOT)} is resolved for Python {names}',
                         f'use one of those: PYTHON=python{newest} bash tools/setup_env.sh (with an existing '
                         '.venv on another Python, also set INLINE_DENSE_VENV to a new folder, or delete .venv)')
    if flavour == 'full' and not stack.full:
        raise SetupError(f'MMCV=full is not available with STACK={stack.name}: its mmcv is installed without '
                         'compiled ops, served by the stand-in',
                         'use the default MMCV=lite here, or the compiled mmcv 2.1.0 on the other stack: '
                         'STACK=openmmlab MMCV=full bash tools/setup_env.sh')
    if flavour == 'full' and version not in FULL_PYTHONS:
        names = ' or '.join('%d.%d' % v for v in FULL_PYTHONS)
        raise SetupError(f"MMCV=full does not build on Python {version[0]}.{version[1]}: mmcv 2.1.0's setup.py reads "
                         "its version through exec() and locals(), which Python 3.13 changed (PEP 667): "
                         "KeyError: '__version__'",
                         'use the default MMCV=lite here (no compiler; the stand-in serves nms, roi_align and the '
                         f'focal losses), or Python {names} for MMCV=full: '
                         f'MMCV=full PYTHON=python{"%d.%d" % FULL_PYTHONS[-1]} bash tools/setup_env.sh')


def make_context(flavour: str, stack: Stack = STACKS[DEFAULT_STACK]) -> Context:
    return Context(venv=chosen_venv(), flavour=flavour, pins=read_pins(stack.lock) if stack.lock.is_file() else {},
                   cache=cache_dir(), stack=stack)


def observe(ctx: Context) -> State:
    """The state :func:`decide` acts on, read from this machine."""
    stamp = ctx.stamp_file.read_text(encoding='utf-8').strip() if ctx.stamp_file.is_file() else None
    state = State(flavour=ctx.flavour, stamp=stamp, env_stamp=env_stamp(ctx.flavour, ctx.venv, ctx.stack),
                  force=os.environ.get('SETUP_FORCE') == '1')
    if ctx.flavour == 'full':
        state.mmcv_wheel = cached_wheel(ctx.cache / 'wheels' / mmcv_key_for(ctx)[0])
    return state


def mmcv_key_for(ctx: Context) -> Tuple[str, str]:
    """The compiled wheel's cache key and its ops target, from the environment's torch (or the pin)."""
    facts = torch_facts(ctx.python) if ctx.python.exists() else None
    torch_version = facts['version'] if facts else ctx.pins['torch']
    ops = compiled_ops_target(facts['cuda'] if facts else None, bool(facts and facts['available']))
    return mmcv_wheel_key(ctx.mmcv_version, torch_version, '%d.%d' % sys.version_info[:2], ops), ops


def uv_env() -> dict:
    return dict(os.environ, **BUILD_ENV)


def setup(ctx: Context) -> None:
    t0 = time.time()
    uv = Tool([str(find_uv(ctx.cache))], ctx.cache / 'logs')
    if not ctx.python.exists():
        say(f'creating virtual environment {ctx.venv} (Python {sys.version.split()[0]})')
        uv(f'creating the virtual environment {ctx.venv}', 'venv', '-q', '--python', sys.executable, str(ctx.venv))
    state = observe(ctx)
    plan = decide(state)
    if plan.action == 'ready':
        proc = run_python(ctx.python, IMPORT_CHECK)
        if proc.returncode == 0:
            say(f'already set up in {ctx.venv} ({ctx.stack.name}, {ctx.flavour}); nothing to do in '
                f'{time.time() - t0:.0f} s')
            return
        say('set up before, but the import check fails now: installing again')
        plan = decide(dataclasses.replace(state, force=True))
    ctx.stamp_file.unlink(missing_ok=True)
    free = shutil.disk_usage(ctx.venv).free / 2 ** 30
    if free < 3:
        raise SetupError(f'only {free:.1f} GiB free on the disk holding {ctx.venv}',
                         'a first install needs about 7 GiB (torch is a CUDA build): free some space, run again')
    work = tempfile.TemporaryDirectory(prefix='inline_dense-setup-')
    lock = ctx.stack.lock
    if ctx.flavour == 'full':
        lock = lock_without(lock, [ctx.stack.mmcv_dist], Path(work.name) / 'lock.txt')
    target = ['--python', str(ctx.python)]
    # Environments this setup made hold the lock exactly; a user's own one keeps its other packages.
    sync = owned_by_setup(ctx.venv)
    say(f'{"syncing" if sync else "installing into"} {ctx.venv}: the {ctx.stack.name} lock '
        f'({len(read_pins(lock))} packages, hashes checked; torch is a CUDA build: ~3 GiB the first time)')
    if sync:
        uv('installing the locked stack', 'pip', 'sync', '-q', *target, '--require-hashes', str(lock), env=uv_env())
    else:
        uv('installing the locked stack', 'pip', 'install', '-q', *target, '--require-hashes', '-r', str(lock),
           env=uv_env())
    compile_openmmlab(ctx.python)
    if ctx.flavour == 'full':
        wheel = install_compiled_mmcv(ctx, uv, plan)
        uv('installing the compiled mmcv', 'pip', 'install', '-q', *target, '--no-deps', '--reinstall', wheel)
    # Editable, without build isolation: the environment's own (locked) setuptools builds it.
    uv(f'installing inline_dense from {ROOT}', 'pip', 'install', '-q', *target, '--no-deps', '--no-build-isolation',
       '--reinstall-package', 'inline_dense', '-e', str(ROOT))
    # An editable install skips build outputs, so the .pth the wheel carries is written here.
    proc = run_python(ctx.python, 'import inline_dense_mmcv_hook as h; print(h.install_pth())')
    if proc.returncode:
        raise SetupError(f'could not install inline_dense_mmcv_hook.pth: {proc.stderr.strip()}')
    check = subprocess.run([str(uv.argv[0]), 'pip', 'check', *target], capture_output=True, text=True)
    if check.returncode:
        print(check.stdout + check.stderr, file=sys.stderr)
        if sync:
            raise SetupError(f'uv reports conflicting requirements in {ctx.venv} (above)',
                             f'delete {ctx.venv} and run this again')
        say(f'WARNING: uv reports conflicts in your environment {ctx.venv} (above); the stack may still work')
    proc = run_python(ctx.python, IMPORT_CHECK)
    print(proc.stdout, end='')
    if proc.returncode:
        print(proc.stderr, file=sys.stderr)
        raise SetupError('the stack was installed but does not import (above)', 'run: SETUP_FORCE=1 bash '
                         'tools/setup_env.sh')
    work.cleanup()
    ctx.stamp_file.write_text(state.env_stamp + '\n', encoding='utf-8')
    say(f'done in {time.time() - t0:.0f} s; environment: {ctx.venv} (activate: source {ctx.venv}/bin/activate)')


def compile_openmmlab(python: Path) -> None:
    """Byte-compiles the OpenMMLab packages, as pip's install does and uv's does not: their first
    import would otherwise print the DeprecationWarnings / SyntaxWarnings of their invalid escape
    sequences (the rest is left to compile on first import: compiling torch's tree too costs ~15 s)."""
    code = ('import compileall, importlib.util, sys\n'
            'for name in ("mmengine", "mmcv", "mmdet", "mmseg"):\n'
            '    spec = importlib.util.find_spec(name)\n'
            '    for folder in (spec.submodule_search_locations or []) if spec else []:\n'
            '        compileall.compile_dir(folder, quiet=1, workers=0)\n')
    proc = subprocess.run([str(python), '-W', 'ignore', '-c', code], capture_output=True, text=True)
    if proc.returncode:
        raise SetupError(f'could not byte-compile the OpenMMLab packages: {proc.stderr.strip()}')


def install_compiled_mmcv(ctx: Context, uv: Tool, plan: Plan) -> str:
    """The compiled mmcv wheel for the environment's torch (installed by then), cached by key."""
    key, ops = mmcv_key_for(ctx)
    folder = ctx.cache / 'wheels' / key
    wheel = cached_wheel(folder)
    if wheel is None:
        with tempfile.TemporaryDirectory(prefix='inline_dense-mmcv-') as work:
            pip = pip_for_build(uv, ctx.python, Path(work))
            built = build_mmcv(pip, ctx.python, ctx.mmcv_version, ops, Path(work), ctx.cache / 'logs',
                               compile_ops=True)
            wheel = store_wheel(built, folder)
        say(f'cached {wheel}')
    else:
        say(f'using the cached compiled mmcv {wheel}')
    return str(wheel)


def pip_for_build(uv: Tool, python: Path, work: Path) -> Tool:
    """The pinned pip (requirements/build.txt) for mmcv's source build, in a folder of its own:
    the environment itself holds the lock only."""
    folder = work / 'pip'
    uv('installing the pinned pip for the mmcv build', 'pip', 'install', '-q', '--python', str(python),
       '--target', str(folder), f'pip=={read_pins(BUILD)["pip"]}')
    return Tool([str(python), '-c', f'import sys; sys.path.insert(0, {str(folder)!r}); from pip._internal.cli.main '
                 'import main; sys.exit(main())', '--disable-pip-version-check'], python.parent.parent / '.logs')


# ------------------------------------------------------------------------ --plan, --check-first-time, --update-lock
def print_plan(ctx: Context) -> None:
    state = observe(ctx)
    plan = decide(state)
    mmcv = ctx.stack.mmcv_dist if ctx.flavour == 'lite' else 'mmcv'
    lines = {'plan': plan.action, 'why': plan.reason, 'stack': ctx.stack.name, 'mmcv': f'{ctx.flavour} ({mmcv})',
             'environment': str(ctx.venv), 'python': sys.version.split()[0], 'lock': str(ctx.stack.lock)}
    if ctx.flavour == 'full':
        lines['mmcv-wheels'] = str(ctx.cache / 'wheels' / mmcv_key_for(ctx)[0])
    print(''.join(f'{k}: {v}\n' for k, v in lines.items()), end='')


def lock_header(stack: Stack) -> str:
    names = ', '.join('%d.%d' % v for v in SUPPORTED_PYTHONS[:-1]) + ' and %d.%d' % SUPPORTED_PYTHONS[-1]
    return (f'# The {stack.name} stack\'s lock: every package the setup installs (STACK={stack.name} bash '
            f'tools/setup_env.sh),\n# one exact version each (one per Python where marked), with hashes. '
            f'Resolved by uv from\n# requirements/{stack.source.name} for Python {names} on every platform '
            '(--universal); not 3.9/3.10: numpy\n# 2.4 has no release for them. Add a pin to the .in file, '
            f'then regenerate: STACK={stack.name} bash tools/setup_env.sh --update-lock\n')


def compile_args(stack: Stack, out: Path) -> List[str]:
    low = '%d.%d' % SUPPORTED_PYTHONS[0]
    return ['pip', 'compile', '-q', str(stack.source), '--universal', '--python-version', low, '--generate-hashes',
            '--no-annotate', '--no-header', '-o', str(out)]


def update_lock(ctx: Context, uv: Tool) -> None:
    """Re-resolves the stack's lock from its .in file with uv's resolver. The versions locked now
    are kept where the .in file still admits them (a new line adds its package and what it
    needs); LOCK_UPGRADE=1 takes the newest allowed versions of everything."""
    with tempfile.TemporaryDirectory(prefix='inline_dense-lock-') as tmp:
        out = Path(tmp) / 'lock.txt'
        if ctx.stack.lock.is_file():
            shutil.copy(ctx.stack.lock, out)  # uv prefers the versions of the output file it replaces
        upgrade = ['--upgrade'] if os.environ.get('LOCK_UPGRADE') == '1' else []
        uv(f'resolving {ctx.stack.source.relative_to(ROOT)}', *compile_args(ctx.stack, out), *upgrade, env=uv_env())
        ctx.stack.lock.write_text(lock_header(ctx.stack) + out.read_text(encoding='utf-8'), encoding='utf-8')
    say(f'wrote {len(read_pins(ctx.stack.lock))} pins to {ctx.stack.lock}')


def rehearse(ctx: Context) -> None:
    """--check-first-time: a throw-away environment with an empty uv cache resolves the lock
    (and, MMCV=full, prepares and builds mmcv's Python part with the pinned build tools)."""
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix='inline_dense-check-') as tmp:
        work = Path(tmp)
        uv = Tool([str(find_uv(ctx.cache))], work / 'logs')
        os.environ.update(UV_CACHE_DIR=str(work / 'uv-cache'))
        say(f'throw-away environment in {work} (empty uv cache)')
        uv('creating a throw-away environment', 'venv', '-q', '--python', sys.executable, str(work / 'venv'))
        python = work / 'venv' / 'bin' / 'python'
        step = 1
        lock = ctx.stack.lock
        if ctx.flavour == 'full':
            say(f'{step}. fetch the mmcv {ctx.mmcv_version} sdist, prepare and build it with the pinned build tools '
                '(no torch here: nothing compiles)')
            build_mmcv(pip_for_build(uv, python, work), python, ctx.mmcv_version, 'cpu', work / 'mmcv', work / 'logs',
                       compile_ops=False)
            lock = lock_without(lock, [ctx.stack.mmcv_dist], work / 'lock.txt')
            step += 1
        say(f'{step}. resolve every pin of {ctx.stack.lock.name} for Python {sys.version_info[0]}.'
            f'{sys.version_info[1]} against the index (uv pip install --dry-run, hashes required)')
        out = uv('resolving the lock', 'pip', 'install', '--dry-run', '--python', str(python), '--require-hashes',
                 '-r', str(lock), env=uv_env())
        say(f'   {len(read_pins(lock))} pins resolve as locked{": " + out.strip() if out.strip() else ""}')
    say(f'first-time check ({ctx.stack.name}, {ctx.flavour}) passed in {time.time() - t0:.0f} s')


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
        stack = chosen_stack()
        check_python(sys.version_info[:2], flavour, stack)
        ctx = make_context(flavour, stack)
        mode = modes[arg]
        if mode == 'plan':
            print_plan(ctx)
        elif mode == 'check':
            rehearse(ctx)
        elif mode == 'lock':
            update_lock(ctx, Tool([str(find_uv(ctx.cache))], ctx.cache / 'logs'))
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
