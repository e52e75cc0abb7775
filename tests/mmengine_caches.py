"""What the test processes keep instead of recomputing inside mmengine, installed by conftest.py.

Each cache answers with what mmengine itself would (tests/test_mmengine_caches.py compares them),
keeps the original as ``__wrapped__``, and changes only how often the work is done:

* :func:`metainfo_once`: which file a ``mmdet::`` / ``mmseg::`` config name means. mmengine parses
  every metafile of the package (about 100 YAML files) for each such base of a config; the answer
  depends on the installed package only, so it is looked up once per process and handed out as a
  copy (a caller may change its dict without changing the next caller's).
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
from typing import Any, Callable, Dict, Tuple


def metainfo_once() -> None:
    import mmengine.config.utils as config_utils
    lookup = config_utils._get_cfg_metainfo
    found: Dict[Tuple[str, str], dict] = {}

    @functools.wraps(lookup)
    def cached(package_path: str, cfg_path: str) -> dict:
        key = (package_path, cfg_path)
        if key not in found:
            found[key] = lookup(package_path, cfg_path)
        return copy.deepcopy(found[key])
    config_utils._get_cfg_metainfo = cached


def format_configs_once() -> None:
    import mmengine.config.config as config_module
    format_code: Callable[..., Any] = config_module.FormatCode
    formatted: Dict[str, Any] = {}

    @functools.wraps(format_code)
    def cached(text: str, **kwargs: Any) -> Any:
        key = text + repr(sorted(kwargs.items()))
        if key not in formatted:
            formatted[key] = format_code(text, **kwargs)
        return formatted[key]
    config_module.FormatCode = cached


class YoungGenerations:
    """Stands for the ``gc`` module inside mmengine's dataset module: its one call, ``collect``,
    collects generations 0 and 1 only."""

    __wrapped__ = gc

    @staticmethod
    def collect(generation: int = 2) -> int:
        return gc.collect(min(generation, 1))


def collect_young_after_packing_datasets() -> None:
    import mmengine.dataset.base_dataset as base_dataset
    base_dataset.gc = YoungGenerations


def install() -> None:
    metainfo_once()
    format_configs_once()
    collect_young_after_packing_datasets()
