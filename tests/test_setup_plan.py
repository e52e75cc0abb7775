"""tools/setup_env.sh's cache key: a change to any of the setup's inputs selects the from-scratch path.

``--plan`` says which path a setup would take (ready / snapshot / cached-mmcv / from-scratch)
without changing anything; these tests run it on a copy of the setup's inputs with a fake cache.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ['tools/setup_env.sh', 'tools/torch_cxx_std.py', 'requirements/build.txt', 'requirements/runtime.txt',
          f'requirements/lock-py{sys.version_info[0]}.{sys.version_info[1]}.txt']


def plan(root: Path, cache: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV', 'SETUP_FORCE', 'FORCE_CUDA')}
    env.update(INLINE_DENSE_CACHE=str(cache), PYTHON=sys.executable)
    out = subprocess.run(['bash', str(root / 'tools' / 'setup_env.sh'), '--plan'], env=env, capture_output=True,
                         text=True, check=True).stdout
    return dict(re.findall(r'^([\w-]+): (.*)$', out, re.M))


@pytest.fixture
def checkout(tmp_path):
    """A copy of the setup's inputs (and a README that is not one), with an empty cache beside it."""
    root = tmp_path / 'repo'
    for name in INPUTS + ['README.md']:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, root / name)
    return root, tmp_path / 'cache'


def cache_mmcv_wheel(info: dict) -> None:
    wheels = Path(info['mmcv-wheels'])
    wheels.mkdir(parents=True)
    (wheels / 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl').write_bytes(b'stand-in')


def test_empty_cache_means_from_scratch_and_a_cached_build_is_reused(checkout):
    root, cache = checkout
    first = plan(root, cache)
    assert first['plan'] == 'from-scratch'
    assert first['recipe'] in first['mmcv-wheels'] and first['recipe'] in first['snapshot']
    cache_mmcv_wheel(first)
    assert plan(root, cache)['plan'] == 'cached-mmcv'
    snapshot = Path(first['snapshot'])
    snapshot.mkdir(parents=True)
    (snapshot / '.inline_dense_template').write_text('/somewhere/.venv\n')
    assert plan(root, cache)['plan'] == 'snapshot'


@pytest.mark.parametrize('changed', INPUTS)
def test_changing_an_input_selects_the_from_scratch_path(checkout, changed):
    root, cache = checkout
    before = plan(root, cache)
    cache_mmcv_wheel(before)
    assert plan(root, cache)['plan'] == 'cached-mmcv'
    with open(root / changed, 'a') as f:
        f.write('\n# changed\n')
    after = plan(root, cache)
    assert after['recipe'] != before['recipe']
    assert after['plan'] == 'from-scratch', after


def test_other_files_do_not_change_the_key(checkout):
    root, cache = checkout
    before = plan(root, cache)
    with open(root / 'README.md', 'a') as f:
        f.write('\nmore words\n')
    assert plan(root, cache)['recipe'] == before['recipe']
