"""What several test modules share: small backbones, the tools as modules, single-threaded torch.

Markers live in pytest.ini. Fixtures here:

* ``tiny_backbone(kind, init=True, **overrides)``: a small InLine-Swin / InLine-PVT / InLine-CSwin
  (``kind`` in ``TINY_KINDS``) with every kind of block, fast on a CPU;
* ``load_tool(name)``: ``tools/<name>.py`` as a module;
* ``one_thread``: torch limited to one thread for the test (small tensors on shared cores);
* ``load_config(path)``: a fresh copy of ``Config.fromfile(path)``, each file read once per session;
* ``toy_dir``: a working directory whose ``data/toy_coco`` and ``data/toy_ade`` (the toy configs'
  ``data_root``) hold tiny toy datasets, made once per session.
"""
import copy
import gc
import importlib.util
import os
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Dict, Tuple

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

if os.environ.get('PYTEST_XDIST_WORKER'):
    # One pytest-xdist worker per core (`-n auto`): each worker, and the tools it starts as
    # subprocesses, computes on one thread instead of all of them contending for every core.
    os.environ.setdefault('OMP_NUM_THREADS', '1')
    torch.set_num_threads(1)

# Python's cyclic garbage collector, at its default thresholds (700, 10, 10), walks every live
# object of a worker dozens of times: a worker holds one to two million (torch, mmdet, mmseg, the
# caches of dynamo and sympy), and graph capture and model building allocate fast. Measured over
# the suite (both workers): 61 s in collections at the defaults; 9 s at these thresholds with
# mmengine's dataset collection below (largest process 2.2 GB). Collections still run, rarer.
gc.set_threshold(10_000, 10, 50)


def read_metafiles_once() -> None:
    """mmengine resolves each ``mmdet::`` / ``mmseg::`` base of a config by parsing every metafile
    of that package again (about 80 YAML files, 0.35 s); our configs have four such bases. The
    files do not change during a test run, so each is parsed once per process. Only the reading
    is cached (mmengine only reads what it gets); the lookup and the merge are mmengine's own."""
    import mmengine.config.utils as config_utils
    read = config_utils.load
    parsed: Dict[str, Any] = {}

    def load(path: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not str(path).endswith('.yml'):
            return read(path, *args, **kwargs)
        if path not in parsed:
            parsed[path] = read(path)
        return parsed[path]
    config_utils.load = load


read_metafiles_once()


def format_configs_once() -> None:
    """mmengine formats a config's text with yapf (0.3-0.5 s for one of our configs) each time it
    asks for ``Config.pretty_text``: a Runner does for its log, its config dump, its visualizer and
    every checkpoint it saves, the same text each time. yapf's formatting is a pure function of
    the text and the style, so each distinct text is formatted once per process; what is formatted,
    and how, stays mmengine's and yapf's."""
    import mmengine.config.config as config_module
    format_code = config_module.FormatCode
    formatted: Dict[str, Any] = {}

    def cached(text: str, **kwargs: Any) -> Any:
        key = text + repr(sorted(kwargs.items()))
        if key not in formatted:
            formatted[key] = format_code(text, **kwargs)
        return formatted[key]
    config_module.FormatCode = cached


format_configs_once()


def collect_young_after_packing_datasets() -> None:
    """mmengine's ``BaseDataset`` packs its annotations into one array and then calls
    ``gc.collect()`` to free the unpacked list at once. A full collection walks every object of
    the process: 0.2-0.9 s in a test worker holding one to two million, and the tests build
    datasets several dozen times (about 30 s of the suite's time). Here that call collects the
    young generations only (what it frees is freed by reference counting anyway); what the
    dataset holds and how it packs it stay mmengine's."""
    import mmengine.dataset.base_dataset as base_dataset

    class YoungGenerations:
        @staticmethod
        def collect(generation: int = 2) -> int:
            return gc.collect(min(generation, 1))
    base_dataset.gc = YoungGenerations


collect_young_after_packing_datasets()

# Per family: class name, and settings with every kind of block (InLine, softmax, the mixed stage).
TINY: Dict[str, Tuple[str, Dict[str, Any]]] = {
    'swin': ('InLineSwin', dict(embed_dims=16, depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8), attn_type='IIMS1')),
    'pvt': ('InLinePVT', dict(embed_dims=(16, 32, 64, 128), depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8),
                              attn_type='IISS')),
    'cswin': ('InLineCSwin', dict(embed_dims=16, depths=(1, 1, 2, 1), num_heads=(2, 2, 4, 8),
                                  split_size=(1, 2, 3, 3), attn_type='ISIS')),
}
TINY_KINDS = tuple(TINY)
# The fewest blocks that still hold every kind of block of a family, for the tests whose cost grows
# with the block count (graph capture): InLine-Swin keeps the mixed stage (an InLine block, then a
# shifted softmax one) and one plain softmax block; InLine-CSwin's blocks in a stage are all alike.
EVERY_KIND_ONCE: Dict[str, Dict[str, Any]] = {'swin': dict(depths=(1, 1, 2, 1)), 'pvt': {},
                                              'cswin': dict(depths=(1, 1, 1, 1))}


def build_tiny(kind: str, init: bool = True, **overrides: Any) -> torch.nn.Module:
    """A small backbone of family ``kind``; ``overrides`` replace any of its settings (``init_cfg``
    too: the OpenMMLab adapter's class, initialised by ``init_weights()`` as a runner does)."""
    import inline_dense.openmmlab as models
    name, settings = TINY[kind]
    model = getattr(models, name)(**dict(settings, **overrides))
    if init:
        model.init_weights()
    return model


@pytest.fixture
def tiny_backbone() -> Callable[..., torch.nn.Module]:
    return build_tiny


_TOOLS: Dict[str, ModuleType] = {}


def import_tool(name: str) -> ModuleType:
    """tools/<name>.py as a module (``tools/test.py`` would clash with the stdlib's ``test``)."""
    if name not in _TOOLS:
        spec = importlib.util.spec_from_file_location(f'inline_dense_tools_{name}', ROOT / 'tools' / f'{name}.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TOOLS[name] = module
    return _TOOLS[name]


@pytest.fixture(scope='session')
def load_tool() -> Callable[[str], ModuleType]:
    return import_tool


_CONFIGS: Dict[str, Any] = {}


def load_config(path: Any) -> Any:
    """A fresh copy of the mmengine Config at ``path``. Reading is cached: resolving ``mmdet::`` /
    ``mmseg::`` bases makes mmengine read every metafile of the package (about a second a config)."""
    from mmengine.config import Config
    key = str(path)
    if key not in _CONFIGS:
        _CONFIGS[key] = Config.fromfile(key)
    return copy.deepcopy(_CONFIGS[key])


TOY_DATA = dict(num_train=8, num_val=3, image_size=64)


@pytest.fixture(scope='session')
def toy_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from inline_dense.toy_data import make_toy_ade, make_toy_coco
    base = tmp_path_factory.mktemp('toy')
    make_toy_coco(str(base / 'data' / 'toy_coco'), **TOY_DATA)
    make_toy_ade(str(base / 'data' / 'toy_ade'), **TOY_DATA)
    return base


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


# Fewer blocks per stage (same widths) for building whole detectors / segmentors fast; Swin keeps
# 3 blocks in stage 3 for InLine-Swin-B's mixed stage ('IIMS2').
SHRUNK_DEPTHS = {'InLineSwin': (1, 1, 3, 1), 'InLinePVT': (1, 1, 1, 1), 'InLineCSwin': (1, 1, 1, 1)}


def shrink_backbone(cfg: Any, keep_init: bool = False) -> Any:
    """An mmengine Config whose InLine backbone has ``SHRUNK_DEPTHS``; no pretrained file
    unless ``keep_init``."""
    cfg.model.backbone.depths = SHRUNK_DEPTHS[cfg.model.backbone.type]
    if not keep_init:
        cfg.model.backbone.init_cfg = None
    return cfg


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
