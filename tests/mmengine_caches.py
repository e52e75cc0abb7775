"""What the test processes keep instead of recomputing inside mmengine, installed by conftest.py.

Each cache answers with what mmengine itself would (tests/openmmlab/test_mmengine_caches.py compares them),
keeps the original as ``__wrapped__``, and changes only how often the work is done. Each is
installed only where the mmengine at hand has the name it replaces (:data:`INSTALLED` says which
were): another mmengine (e.g. onedl-mmengine, which imports yapf's ``FormatCode`` inside
``Config.pretty_text``) runs the suite uncached there, never patched by guess:

* :func:`metainfo_once`: the metafiles that say which file a ``mmdet::`` / ``mmseg::`` config name
  means. mmengine parses every metafile of the package (about 100 YAML files) for each such name of
  a config; they do not change while the tests run, so each is parsed once per process. mmengine's
  lookup only reads them, and the entry it returns is handed out as a copy, so a caller that changes
  it does not change what the next caller gets.
* :func:`format_configs_once`: yapf's formatting of a config's text, which a Runner asks for again
  for its log, its config dump, its visualizer and every checkpoint; a pure function of the text
  and the style, so each distinct text is formatted once per process.
* :func:`collect_young_after_packing_datasets`: mmengine's ``BaseDataset`` calls ``gc.collect()``
  after packing its annotations to free the unpacked list at once; reference counting frees it
  anyway, and a full collection walks every object of a test worker (one to two million), so the
  young generations only are collected there.
"""
import copy
import functools
import gc
from collections.abc import Callable
from types import ModuleType
from typing import Any

INSTALLED: dict[str, bool] = {}  # cache name -> whether this mmengine has what it replaces


def _has(module: ModuleType, *names: str) -> bool:
    return all(hasattr(module, name) for name in names)


def metainfo_once() -> bool:
    import mmengine.config.utils as config_utils
    if not _has(config_utils, 'load', '_get_cfg_metainfo'):
        return False
    read = config_utils.load
    parsed: dict[str, Any] = {}

    @functools.wraps(read)
    def load(path: Any, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or not str(path).endswith('.yml'):
            return read(path, *args, **kwargs)
        if path not in parsed:
            parsed[path] = read(path)
        return parsed[path]  # shared: mmengine's lookup below only reads it

    lookup = config_utils._get_cfg_metainfo

    @functools.wraps(lookup)
    def copied(package_path: str, cfg_path: str) -> dict:
        return copy.deepcopy(lookup(package_path, cfg_path))  # the one dict that leaves mmengine's lookup
    config_utils.load = load
    config_utils._get_cfg_metainfo = copied
    return True


def format_configs_once() -> bool:
    import mmengine.config.config as config_module
    if not callable(getattr(config_module, 'FormatCode', None)):
        return False
    format_code: Callable[..., Any] = config_module.FormatCode
    formatted: dict[str, Any] = {}

    @functools.wraps(format_code)
    def cached(text: str, **kwargs: Any) -> Any:
        key = text + repr(sorted(kwargs.items()))
        if key not in formatted:
            formatted[key] = format_code(text, **kwargs)
        return formatted[key]
    config_module.FormatCode = cached
    return True


class YoungGenerations:
    """Stands for the ``gc`` module inside mmengine's dataset module: its one call, ``collect``,
    collects generations 0 and 1 only."""

    __wrapped__ = gc

    @staticmethod
    def collect(generation: int = 2) -> int:
        return gc.collect(min(generation, 1))


def collect_young_after_packing_datasets() -> bool:
    import mmengine.dataset.base_dataset as base_dataset
    if getattr(base_dataset, 'gc', None) is not gc:
        return False
    base_dataset.gc = YoungGenerations
    return True


def install() -> dict[str, bool]:
    INSTALLED.update(metainfo=metainfo_once(), format=format_configs_once(),
                     gc=collect_young_after_packing_datasets())
    return INSTALLED
