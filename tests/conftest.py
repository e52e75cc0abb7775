"""The suite's settings and fixtures; the helpers test modules import live in helpers.py.

Markers live in pytest.ini. Fixtures here:

* ``tiny_backbone(kind, init=True, **overrides)``: a small backbone of any family of the registry
  (``kind`` in ``TINY_KINDS``) with every kind of block, fast on a CPU;
* ``load_tool(name)``: ``tools/<name>.py`` as a module;
* ``one_thread``: torch limited to one thread for the test (small tensors on shared cores);
* ``toy_dir``: a working directory whose ``data/toy_coco`` and ``data/toy_ade`` (the toy configs'
  ``data_root``) hold tiny toy datasets, made once per session;
* ``no_process_left_running`` (every test): a test fails if a child process it started (a data loader's
  worker, say) is still running after it and after a garbage collection.
"""
import gc
import multiprocessing
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

import mmengine_caches
from helpers import TINY_KINDS, TOY_DATA, build_tiny, import_tool

if os.environ.get('PYTEST_XDIST_WORKER'):
    # One pytest-xdist worker per core (`-n auto`): each worker, and the tools it starts as
    # subprocesses, computes on one thread instead of all of them contending for every core.
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    torch.set_num_threads(1)

# Python's cyclic garbage collector, at its default thresholds (700, 10, 10), walks every live
# object of a worker dozens of times: a worker holds one to two million (torch, mmdet, mmseg, the
# caches of dynamo and sympy), and graph capture and model building allocate fast. Collections
# still run, rarer; what they free is the same (docs/tests.md has the time this saves).
gc.set_threshold(10_000, 10, 50)


mmengine_caches.install()


@pytest.fixture(autouse=True)
def no_process_left_running():
    """A child process a test leaves running outlives the test run: a DataLoader worker forked from an
    xdist worker keeps a copy of that worker's memory (gigabytes) after the suite ends, blocked on a pipe
    nobody reads. Processes that a garbage collection ends (their loader was only unreachable) pass."""
    before = {p.pid for p in multiprocessing.active_children()}
    yield
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    if left:
        gc.collect()  # ends the workers of loaders that were only unreachable
        for process in left:
            process.join(timeout=5)  # one told to stop may take a moment to exit
        left = [p for p in left if p.is_alive()]
    if left:
        pytest.fail(f'the test left child processes running: {left}; end them (a Runner\'s loaders: '
                    f'launch.loader_workers_ended, or num_workers=0)', pytrace=False)


@pytest.fixture
def tiny_backbone() -> Callable[..., torch.nn.Module]:
    return build_tiny


@pytest.fixture(scope='session')
def load_tool() -> Callable[[str], ModuleType]:
    return import_tool


@pytest.fixture(scope='session')
def toy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from inline_dense.toy_data import make_toy_ade, make_toy_coco
    base = tmp_path_factory.mktemp('toy')
    make_toy_coco(str(base / 'data' / 'toy_coco'), **TOY_DATA)
    make_toy_ade(str(base / 'data' / 'toy_ade'), **TOY_DATA)
    return base


@pytest.fixture
def no_local_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``inline://`` lookups that see nothing of this machine: an empty cache
    (``INLINE_DENSE_CACHE=tmp_path/cache``), a working directory and a 'repository root' without
    ``checkpoints/``. Returns ``tmp_path``."""
    from inline_dense.checkpoint import sources
    monkeypatch.setenv('INLINE_DENSE_CACHE', str(tmp_path / 'cache'))
    work = tmp_path / 'work'
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(sources, 'repo_root', lambda: tmp_path / 'repo')
    return tmp_path


@pytest.fixture
def one_thread():
    """Small tensors on busy shared cores: several threads wait on each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test that takes ``kind`` and does not parametrize it runs for every backbone family."""
    explicit = any('kind' in str(m.args[0]) for m in metafunc.definition.iter_markers('parametrize'))
    if 'kind' in metafunc.fixturenames and not explicit:
        metafunc.parametrize('kind', TINY_KINDS)


# Modules whose slow tests take a minute or more each (exports, compiles, whole tool runs).
HEAVIEST = ('test_export_onnx', 'test_compile', 'test_gpu_check', 'test_resume_kill')


def pytest_collection_modifyitems(items: list) -> None:
    """Slow tests first, the heaviest of them first of all. Handed to pytest-xdist workers one at a
    time (`-n auto --maxschedchunk 1`), the long ones start at once and the short ones fill the
    gaps, instead of one long test ending the run alone. Only the order changes."""
    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker('slow') is None:
            return 2
        return 0 if item.module.__name__.rsplit('.', 1)[-1] in HEAVIEST else 1
    items.sort(key=rank)  # stable: collection order within each rank
