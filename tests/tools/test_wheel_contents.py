"""What the wheel installs: the package users run and the mmcv hook, nothing of this repository's
own machinery (the GPU check and its wheel folder live in inline_dense_dev/, run from a checkout).

The files come from ``setup.py build_py``, the step that fills the wheel (less than a second;
tests/ops/test_mmcv_ops.py builds a whole wheel for the hook's .pth)."""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# running pip from code: ``[sys.executable, '-m', 'pip', ...]`` or pip's internals
RUNS_PIP = re.compile(r"""['"]-m['"],\s*['"]pip['"]|\bpip\._internal\b|\bimport pip\b""")


def built_files(tmp_path: Path) -> list:
    out = tmp_path / 'lib'
    subprocess.run([sys.executable, 'setup.py', '-q', 'build_py', '--build-lib', str(out)], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    return sorted(p.relative_to(out) for p in out.rglob('*') if p.is_file())


def test_the_wheel_holds_the_package_and_the_hook_only(tmp_path):
    files = built_files(tmp_path)
    assert {f.parts[0] for f in files} == {'inline_dense', 'inline_dense_mmcv_hook.py', 'inline_dense_mmcv_hook.pth'}
    assert not [f for f in files if 'gpu_check' in str(f) or 'wheels' in f.name]
    lib = tmp_path / 'lib'
    assert not [f for f in files if f.suffix == '.py' and RUNS_PIP.search((lib / f).read_text(encoding='utf-8'))]


def test_the_pip_pattern_finds_a_pip_call():
    assert RUNS_PIP.search("cmd = [sys.executable, '-m', 'pip', 'download', '--no-deps']")
    assert not RUNS_PIP.search("raise ImportError('pip install .[lite] installs mmcv-lite')")
    assert (ROOT / 'inline_dense_dev' / 'gpu_check' / 'wheels.py').is_file()
    assert RUNS_PIP.search((ROOT / 'inline_dense_dev' / 'gpu_check' / 'wheels.py').read_text(encoding='utf-8'))
