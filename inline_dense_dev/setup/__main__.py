"""The setup behind ``bash tools/setup_env.sh`` (``python -m inline_dense_dev.setup``): uv syncs the
environment to uv.lock.

    bash tools/setup_env.sh         set up the environment, or bring it up to date (safe to repeat)
    bash tools/setup_env.sh --plan  say what the setup would do; change nothing
    MMCV=full bash tools/setup_env.sh --check-first-time   rehearse the compiled mmcv's build (no compile)
uv (pinned in requirements/build.txt, fetched once into $INLINE_DENSE_CACHE/uv) installs what uv.lock
pins for the project (editable), one stack's extra and the ``dev`` group; then the stack must import.
Settings, read once from the environment:
  STACK=openmmlab (default: the last OpenMMLab releases, mmcv-lite) or onedl (their successors)
  MMCV=lite (default: no compiler) or full (openmmlab: mmcv compiled with its ops; mmcv_full.py here)
  PYTHON the interpreter for a new environment: 3.11, 3.12 or 3.13 (default python3)
  INLINE_DENSE_VENV the environment (default .venv here; an active $VIRTUAL_ENV elsewhere is ignored)
  UV a uv binary instead of the pinned one; INLINE_DENSE_CACHE the setup's cache (~/.cache/inline_dense);
  UV_CACHE_DIR uv's cache; FORCE_CUDA=1/0, MAX_JOBS, CXX: the compiled mmcv's build
  PYTHONDONTWRITEBYTECODE (set: uv byte-compiles the whole environment, which Python then never has to;
    UV_COMPILE_BYTECODE, when set, is uv's own choice and left to uv)
"""
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence

from . import mmcv_full
from .env import ROOT, STACKS, Settings, SetupError, check_python, child_env, find_uv, run_uv, say, sync_args

IMPORT_CHECK = '''
import compileall, importlib.util, warnings
warnings.simplefilter('ignore')  # byte-compiled as pip does (uv does not): no escape warnings at first import
for name in ('mmengine', 'mmcv', 'mmdet', 'mmseg'):
    [compileall.compile_dir(d, quiet=1, workers=0) for d in importlib.util.find_spec(name).submodule_search_locations]
import torch, mmcv, mmcv._ext as ext, mmcv.ops, mmdet, mmseg, mmengine, inline_dense
from mmdet.apis import DetInferencer
from mmseg.apis import MMSegInferencer
from mmcv.ops import nms
assert nms(torch.tensor([[0., 0., 4., 4.], [1., 1., 5., 5.]]), torch.tensor([.9, .8]), .3)[1].tolist() == [0]
ops = 'inline_dense stand-in' if getattr(ext, 'IS_STAND_IN', False) else 'compiled'
print(f'[setup] ok: inline_dense {inline_dense.__version__} | torch {torch.__version__} | mmengine '
      f'{mmengine.__version__} | mmcv {mmcv.__version__} ({ops} ops) | mmdet {mmdet.__version__} | mmseg '
      f'{mmseg.__version__}')
'''


def setup(settings: Settings) -> None:
    t0 = time.time()
    uv = find_uv(settings)
    if settings.note():
        say(settings.note())
    if settings.bytecode():
        say(settings.bytecode())
    say(f'syncing {settings.venv} to uv.lock: STACK={settings.stack}, MMCV={settings.flavour}, Python '
        f'{sys.version.split()[0]} (the first time: ~3 GiB, torch is a CUDA build)')
    run_uv(uv, settings, 'installing the locked environment', *sync_args(settings))
    if settings.flavour == 'full':
        mmcv_full.install(settings, uv)
    if subprocess.run([str(settings.python), '-c', IMPORT_CHECK], env=child_env()).returncode:
        raise SetupError('the environment was installed but the stack does not import (above)',
                         f'run it again from nothing: rm -rf {settings.venv} && bash tools/setup_env.sh')
    say(f'done in {time.time() - t0:.0f} s: {settings.venv} (activate: source {settings.venv}/bin/activate)')


def print_plan(settings: Settings) -> None:
    lines = {'stack': f'{settings.stack} (extra [{STACKS[settings.stack]}])', 'mmcv': settings.flavour,
             'environment': settings.venv, 'environment-now': 'exists' if settings.python.exists() else 'made by uv',
             'python': sys.version.split()[0], 'lock': ROOT / 'uv.lock', 'note': settings.note()[6:],
             'bytecode': {True: 'compiled by uv (PYTHONDONTWRITEBYTECODE is set)',
                          None: 'as UV_COMPILE_BYTECODE tells uv',
                          False: 'cached by Python at first import'}[settings.compile_bytecode],
             'uv': settings.uv or f'the pinned uv, in {settings.cache / "uv"}',
             'command': f'uv {" ".join(sync_args(settings))}'}
    print(''.join(f'{k}: {v}\n' for k, v in lines.items() if v), end='')


def main(argv: Sequence[str], env: Mapping[str, str] = os.environ) -> int:
    if list(argv) in (['-h'], ['--help']):
        print(__doc__)
        return 0
    if list(argv) not in ([], ['--plan'], ['--check-first-time']):
        print(f'tools/setup_env.sh: unknown option {" ".join(argv)} (see --help)', file=sys.stderr)
        return 2
    try:
        check_python(sys.version_info[:2])
        settings = Settings.from_env(env)
        if argv == ['--plan']:
            print_plan(settings)
        elif argv == ['--check-first-time']:
            mmcv_full.rehearse(settings, find_uv(settings))
        else:
            setup(settings)
    except SetupError as exc:
        print(f'[setup] ERROR: {exc}\n[setup]   -> {exc.hint}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
