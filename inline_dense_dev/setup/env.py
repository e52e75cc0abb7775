"""What the setup reads and runs: its settings (read once from the environment), its errors, and uv
(the pinned binary, the project's commands). Standard library only; the entry is
:mod:`inline_dense_dev.setup.__main__` (``bash tools/setup_env.sh``)."""
import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / 'requirements' / 'build.txt'
STACKS = {'openmmlab': 'lite', 'onedl': 'onedl'}  # stack -> its extra in pyproject.toml
FLAVOURS = ('lite', 'full')
# A failed uv step: what its output says -> what to do.
UV_CAUSES = (
    (r'needs to be updated|lockfile .* not up-to-date', 'uv.lock does not match pyproject.toml: run `uv lock` '
     '(after editing pyproject.toml) and commit uv.lock'),
    (r'[Hh]ash mismatch', 'a proxy or mirror serves other files than the index: use the index itself'),
    (r'No space left on device', 'free disk space (a first setup needs about 7 GiB), then run this again'),
    (r'Failed to fetch|dns error|Connection|timed out', 'check network access to PyPI, then run this again'),
)


class SetupError(Exception):
    """A failure: what went wrong (the message) and, in one line, what to do (``hint``)."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.hint = hint


def say(message: str) -> None:
    print(f'[setup] {message}', flush=True)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the setup reads from the environment, read once (:meth:`from_env`)."""
    stack: str = 'openmmlab'
    flavour: str = 'lite'
    venv: Path = ROOT / '.venv'
    uv: Path | None = None         # $UV
    cache: Path = Path.home() / '.cache' / 'inline_dense'
    ignored_venv: str = ''            # an active $VIRTUAL_ENV that is not ``venv``
    force_cuda: str = ''              # MMCV=full: '1' CUDA ops, '0' none, '' when torch sees a GPU and nvcc exists
    max_jobs: int = 1                 # MMCV=full: compile jobs
    cxx: str = 'g++'                  # MMCV=full: the C++ compiler
    compile_bytecode: bool | None = False  # uv byte-compiles the environment; None: $UV_COMPILE_BYTECODE decides

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> 'Settings':
        stack, flavour = env.get('STACK', 'openmmlab'), env.get('MMCV', 'lite')
        if stack not in STACKS:
            raise SetupError(f'STACK={stack} is not a stack', f'use STACK={" or STACK=".join(STACKS)} (default '
                             'openmmlab; docs/installation.md#which-stack says which to choose)')
        if flavour not in FLAVOURS:
            raise SetupError(f'MMCV={flavour} is not a flavour', 'use MMCV=lite (default, no compiler) or MMCV=full '
                             '(mmcv compiled with all its ops)')
        if flavour == 'full' and stack != 'openmmlab':
            raise SetupError(f'MMCV=full is not available with STACK={stack}: its mmcv is installed without '
                             'compiled ops, served by the stand-in', 'use MMCV=lite here, or the compiled mmcv on '
                             'the other stack: STACK=openmmlab MMCV=full bash tools/setup_env.sh')
        venv = Path(env['INLINE_DENSE_VENV']).absolute() if env.get('INLINE_DENSE_VENV') else ROOT / '.venv'
        if venv.exists() and not venv.is_dir():
            raise SetupError(f'INLINE_DENSE_VENV={venv} is a file, not an environment folder',
                             'name a folder (made if missing), or unset INLINE_DENSE_VENV to use .venv')
        if venv.is_dir() and any(venv.iterdir()) and not (venv / 'pyvenv.cfg').is_file():
            raise SetupError(f'{venv} is a folder that holds no virtual environment (no pyvenv.cfg): the setup '
                             'will not write into it', 'name a new or empty folder in INLINE_DENSE_VENV')
        active = env.get('VIRTUAL_ENV', '')
        ignored = active if active and Path(active).absolute() != venv else ''
        uv = Path(env['UV']) if env.get('UV') else None
        if uv is not None and not (uv.is_file() and os.access(uv, os.X_OK)):
            raise SetupError(f'UV={uv} is not an executable file', 'point UV at a uv binary (UV=$(command -v uv)), '
                             'or unset UV to use the pinned uv')
        if not env.get('MAX_JOBS', '1').isdigit():
            raise SetupError(f'MAX_JOBS={env["MAX_JOBS"]} is not a number', 'set MAX_JOBS=1 (or more), or unset it')
        default_cache = Path(env.get('XDG_CACHE_HOME') or Path.home() / '.cache') / 'inline_dense'
        return cls(stack=stack, flavour=flavour, venv=venv, uv=uv, ignored_venv=ignored,
                   cache=Path(env.get('INLINE_DENSE_CACHE') or default_cache), force_cuda=env.get('FORCE_CUDA', ''),
                   max_jobs=int(env.get('MAX_JOBS') or os.cpu_count() or 1), cxx=env.get('CXX', 'g++'),
                   compile_bytecode=(None if 'UV_COMPILE_BYTECODE' in env
                                     else bool(env.get('PYTHONDONTWRITEBYTECODE'))))

    @property
    def python(self) -> Path:
        return self.venv / 'bin' / 'python'

    def bytecode(self) -> str:
        """Why uv byte-compiles the environment, or '' where it does not (the default: Python caches the
        bytecode of each module at its first import)."""
        if not self.compile_bytecode:
            return ''
        return ('PYTHONDONTWRITEBYTECODE is set, so Python would compile every module again in every process '
                '(the stack imported in 29-32 s instead of 14 s on a 2-core machine): uv byte-compiles the '
                'environment once')

    def note(self) -> str:  # the line said about an active environment left alone ('' when none)
        if not self.ignored_venv:
            return ''
        stale = '' if Path(self.ignored_venv, 'pyvenv.cfg').is_file() else ', which names no environment (stale)'
        return (f'note: VIRTUAL_ENV={self.ignored_venv}{stale} is ignored: setting up {self.venv} '
                f'(INLINE_DENSE_VENV=<folder> picks another)')


def supported_pythons() -> tuple[tuple[int, int], tuple[int, int]]:
    """The lowest supported Python and the first unsupported one: pyproject.toml's requires-python."""
    found = re.search(r'requires-python = ">=(\d+)\.(\d+),\s*<(\d+)\.(\d+)"', (ROOT / 'pyproject.toml').read_text())
    return (int(found[1]), int(found[2])), (int(found[3]), int(found[4]))


def check_python(version: tuple[int, int]) -> None:
    low, high = supported_pythons()
    if not low <= version < high:
        names = ', '.join(f'{low[0]}.{minor}' for minor in range(low[1], high[1]))
        raise SetupError(f'Python {version[0]}.{version[1]} is not supported: pyproject.toml asks for {names}',
                         f'use one of those: PYTHON=python{low[0]}.{high[1] - 1} bash tools/setup_env.sh')


def find_uv(settings: Settings) -> Path:
    """$UV (when it runs), else the pinned uv, fetched once from the index by this Python's (or its base's) pip."""
    if settings.uv is not None:
        if subprocess.run([str(settings.uv), '--version'], capture_output=True).returncode:
            raise SetupError(f'UV={settings.uv} does not run (`{settings.uv} --version` fails)',
                             'point UV at a working uv binary, or unset UV to use the pinned uv')
        return settings.uv
    version = re.search(r'^uv==(\S+)', BUILD.read_text(encoding='utf-8'), re.M).group(1)
    folder = settings.cache / 'uv' / version
    exe = folder / 'bin' / 'uv'
    if exe.is_file() and subprocess.run([str(exe), '--version'], capture_output=True).returncode == 0:
        return exe
    partial, error = settings.cache / 'uv' / f'.partial-{os.getpid()}', 'no pip'
    for python in dict.fromkeys([sys.executable, str(Path(sys.base_prefix) / 'bin' / 'python3')]):
        shutil.rmtree(partial, ignore_errors=True)
        proc = subprocess.run([python, '-m', 'pip', 'install', '-q', '--disable-pip-version-check', '--no-deps',
                               '--only-binary', ':all:', '--target', str(partial), f'uv=={version}'],
                              capture_output=True, text=True, env=child_env())
        if proc.returncode == 0 and (partial / 'bin' / 'uv').is_file():
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(partial, folder)
            return exe
        error = (proc.stderr.strip().splitlines() or ['no uv binary in the wheel'])[-1]
    raise SetupError(f'uv {version} could not be had from the package index ({error})',
                     'check network access to PyPI, or install uv and point UV at it: UV=/path/to/uv bash '
                     'tools/setup_env.sh')


def child_env(**extra: str) -> dict[str, str]:
    """The environment of the setup's subprocesses: this one's, without an active ``VIRTUAL_ENV`` and
    without the checkout on ``PYTHONPATH`` (tools/setup_env.sh puts it there for this package only: the
    environment must import inline_dense through its own install), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k != 'VIRTUAL_ENV'}
    paths = [p for p in env.pop('PYTHONPATH', '').split(os.pathsep) if p and Path(p).resolve() != ROOT]
    if paths:
        env['PYTHONPATH'] = os.pathsep.join(paths)
    return dict(env, **extra)


def run_uv(uv: Path, settings: Settings, what: str, *args: str) -> None:
    """One uv command on the project, for ``settings.venv``; a failure names its cause."""
    env = child_env(UV_PROJECT_ENVIRONMENT=str(settings.venv))
    proc = subprocess.run([str(uv), *args], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    if proc.returncode:
        print(proc.stderr.rstrip(), file=sys.stderr)
        hint = next((h for pattern, h in UV_CAUSES if re.search(pattern, proc.stderr)),
                    'run this again; if it fails the same way, report it with the output above')
        raise SetupError(f"{what} failed (uv's output above)", hint)


def sync_args(settings: Settings) -> list:
    args = ['sync', '--locked', '-q', *(['--compile-bytecode'] if settings.compile_bytecode else []),
            '--python', sys.executable, '--extra', STACKS[settings.stack]]
    if settings.flavour == 'full':  # mmcv-lite's place goes to the compiled mmcv, which uv leaves alone
        args += ['--no-install-package', 'mmcv-lite', '--inexact']
    return args
