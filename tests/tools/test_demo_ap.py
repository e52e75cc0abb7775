"""The README's main job as a newcomer runs it (``python tools/demo_toy.py``: its default config, 400
iterations, its own toy data) reaches the AP the README promises. The exact figures depend on the CPU's
floating-point order (how its vector units group sums), so the README gives this test's bound, not a
list of runs."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MIN_AP = 0.78  # box and mask AP; the README's demo paragraph states it


def test_the_readme_states_this_bound():
    readme = (ROOT / 'README.md').read_text()
    paragraph = readme[readme.index('## Main job'):readme.index('## Tests')]
    assert f'at least {MIN_AP:.2f}' in paragraph
    assert 'tests/tools/test_demo_ap.py' in paragraph


@pytest.mark.slow
def test_the_demo_reaches_the_readme_ap(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / 'tools' / 'demo_toy.py'), '--work-dir', str(tmp_path / 'w')],
                          capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = dict(re.findall(r'^\[demo\]\s+(box AP|mask AP): ([0-9.]+)$', proc.stdout, re.M))
    print(found)
    assert set(found) == {'box AP', 'mask AP'}, proc.stdout[-2000:]
    assert float(found['box AP']) >= MIN_AP
    assert float(found['mask AP']) >= MIN_AP
