"""The torch-only core imports nothing of OpenMMLab or timm, even where they are installed: the CI's
core-only check (``.ci/core_only_check.py``: import, build, odd sizes, the authors' fixtures through
path, URL and ``inline://``) runs here with those packages made unimportable. (The CI also runs it
in an environment without them: ``.ci/core_only.sh``.)"""
import subprocess
import sys
import textwrap
from pathlib import Path

from inline_dense import registry

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / '.ci' / 'core_only_check.py'
FIXTURES = ROOT / 'tests' / 'data' / 'fixtures'

# a finder first on sys.meta_path that refuses the names, as an environment without them would
BLOCKED_RUN = textwrap.dedent('''
    import importlib.abc, runpy, sys

    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split('.')[0] in ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'timm'):
                raise ImportError(f'{name} is not installed here (blocked by tests/test_core_only.py)')
            return None

    sys.meta_path.insert(0, Absent())
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name='__main__')
''')


def run_blocked(code: str, args: list, home: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code, *args], cwd=home, capture_output=True, text=True,
                          timeout=600, env={'PYTHONPATH': str(ROOT), 'PATH': '/usr/bin:/bin', 'HOME': str(home)})


def test_the_core_works_without_openmmlab_and_timm(tmp_path):
    done = run_blocked(BLOCKED_RUN, [str(CHECK), '--quick', str(FIXTURES)], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert '[core-only] ok: no module of mmengine, mmcv, mmdet, mmseg, timm imported' in done.stdout, done.stdout
    for variant in (spec.fixture.name for spec in registry.FAMILIES.values()):
        assert f'[core-only] {variant}: max |ours - authors| per load path' in done.stdout, done.stdout


def test_the_block_works(tmp_path):
    """The same run with an import of the adapter fails: the blocked packages are really absent."""
    code = BLOCKED_RUN.replace("runpy.run_path(sys.argv[0], run_name='__main__')", 'import inline_dense.openmmlab')
    done = run_blocked(code, ['x'], tmp_path)
    assert done.returncode != 0, done.stderr[-2000:]
    assert 'blocked by tests/test_core_only.py' in done.stderr, done.stderr[-2000:]
