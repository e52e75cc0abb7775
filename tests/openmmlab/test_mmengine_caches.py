"""The suite's mmengine caches (tests/mmengine_caches.py, installed by conftest.py) answer what
mmengine itself answers: the suite runs against the mmengine users run, only faster."""
import gc

import mmengine
import mmengine.config.config as config_module
import mmengine.config.utils as config_utils
import mmengine.dataset.base_dataset as base_dataset
import pytest
from mmengine.config import Config
from mmengine.utils import get_installed_path

import mmengine_caches
from helpers import ROOT

CONFIG = ROOT / 'configs' / 'mask_rcnn' / 'mask-rcnn_inline-swin-t_fpn_1x_coco.py'


def cache_of_this_mmengine(name):
    """Skips where this mmengine lacks what the cache replaces (and checks that it does lack it)."""
    if not mmengine_caches.INSTALLED[name]:
        pytest.skip(f'mmengine {mmengine.__version__} has nothing the {name} cache replaces')


def test_the_caches_are_installed_and_keep_the_originals():
    assert mmengine_caches.INSTALLED['metainfo']
    assert mmengine_caches.INSTALLED['gc']  # both stacks have these
    patched = [config_utils.load, config_utils._get_cfg_metainfo]
    if mmengine_caches.INSTALLED['format']:
        patched.append(config_module.FormatCode)
    else:  # not installed only where this mmengine has no module-level FormatCode
        assert not hasattr(config_module, 'FormatCode')
    for function in patched:
        assert hasattr(function, '__wrapped__')
        assert function is not function.__wrapped__
    assert base_dataset.gc is mmengine_caches.YoungGenerations


def test_metainfo_is_mmengines_and_a_callers_change_does_not_reach_the_next(monkeypatch):
    package = get_installed_path('mmdet')
    name = 'mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py'
    with monkeypatch.context() as uncached_mmengine:
        uncached_mmengine.setattr(config_utils, 'load', config_utils.load.__wrapped__)
        uncached = config_utils._get_cfg_metainfo.__wrapped__(package, name)
    first = config_utils._get_cfg_metainfo(package, name)
    assert first == uncached
    first['Config'] = 'changed by a caller'
    assert config_utils._get_cfg_metainfo(package, name) == uncached
    with pytest.raises(ValueError, match='Expected configs'):  # mmengine's own error, not cached away
        config_utils._get_cfg_metainfo(package, 'no/such_config')


def test_a_config_prints_the_same_with_and_without_the_formatting_cache(monkeypatch):
    """(Which files the config's bases name is compared above, on mmengine's lookup itself.)"""
    cache_of_this_mmengine('format')
    config = Config.fromfile(str(CONFIG))
    cached_text = config.pretty_text
    assert config.pretty_text == cached_text  # the second call is answered from the cache
    monkeypatch.setattr(config_module, 'FormatCode', config_module.FormatCode.__wrapped__)
    assert config.pretty_text == cached_text


def test_the_dataset_collection_collects_the_young_generations(monkeypatch):
    asked = []
    monkeypatch.setattr(gc, 'collect', lambda generation=2: asked.append(generation) or 0)
    base_dataset.gc.collect()  # what BaseDataset._serialize_data calls after packing
    assert asked == [1]
