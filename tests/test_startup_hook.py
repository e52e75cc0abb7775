"""The ``.pth`` hook runs in every Python of the environment (pip, DataLoader workers, subprocesses):
at start it must import nothing the interpreter has not loaded already. ``importlib.abc`` pulled in
``importlib.resources`` and ``typing`` (17 ms per process, measured by the figures in the report, not
here). The hook is read from a site directory of its own, as a regular install puts it."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ('importlib.abc', 'importlib.resources', 'importlib.util', 'importlib.machinery', 'typing', 'tempfile',
         'inline_dense')


def site_dir(tmp_path: Path, with_module: bool = True) -> Path:
    folder = tmp_path / 'site'
    folder.mkdir()
    shutil.copy(ROOT / 'inline_dense_mmcv_hook.pth', folder)
    if with_module:
        shutil.copy(ROOT / 'inline_dense_mmcv_hook.py', folder)
    return folder


def started(folder: Path, code: str) -> subprocess.CompletedProcess:
    """A fresh interpreter without site-packages (-S) that reads ``folder`` as a site dir, then runs ``code``."""
    return subprocess.run([sys.executable, '-S', '-c', 'import sys, site; before = set(sys.modules); '
                           f'site.addsitedir({str(folder)!r}); added = set(sys.modules) - before; ' + code],
                          capture_output=True, text=True, timeout=120, cwd=folder)


def test_the_hook_imports_nothing_heavy_at_start(tmp_path):
    proc = started(site_dir(tmp_path), 'print(sorted(added)); print(type(sys.meta_path[-1]).__name__)')
    assert proc.returncode == 0, proc.stderr
    assert not proc.stderr
    added, finder = proc.stdout.strip().splitlines()
    assert finder == 'MmcvExtFinder'
    assert eval(added) == ['inline_dense_mmcv_hook']  # the hook module alone


def test_the_finder_still_serves_the_stand_in(tmp_path):
    """Found lazily, by the same spec as before (importlib.util imported at the lookup, not at start)."""
    pytest.importorskip('mmcv')
    proc = subprocess.run([sys.executable, '-c', 'import sys, inline_dense_mmcv_hook as h; '
                           'spec = h.install().find_spec("mmcv._ext"); '
                           'print(spec.name, spec.origin.endswith("ext.py"), h.install() is h.install()); '
                           'print(h.MmcvExtFinder().find_spec("mmcv.other")); print(h.describe())'],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == 'mmcv._ext True True'
    assert lines[1] == 'None'
    assert lines[2].startswith(("mmcv's compiled extension", 'inline_dense stand-in'))


def test_a_leftover_pth_without_its_module_is_silent(tmp_path):
    proc = started(site_dir(tmp_path, with_module=False), 'print(sorted(m for m in added if "inline" in m))')
    assert proc.returncode == 0
    assert not proc.stderr
    assert proc.stdout.strip() == '[]'


@pytest.mark.parametrize('name', HEAVY)
def test_what_counts_as_heavy_is_not_loaded_by_a_bare_interpreter(name, tmp_path):
    """The comparison above can fail: none of these is loaded before the site dir is read."""
    empty = tmp_path / 'empty'
    empty.mkdir()
    proc = started(empty, f'print({name!r} in sys.modules)')
    assert proc.stdout.strip() == 'False', proc.stderr
