"""An InLine detector or segmentor is freed by ``del``, without waiting for the garbage collector:
the padding-mask handle and the model referred to each other (the model holds the handle and its hooks,
the handle held the model and its backbones), so the weights (and GPU memory) stayed until the next full
collection. The handle now refers to them weakly."""
import gc
import weakref
from pathlib import Path

import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (registers the backbones and installs the padding mask)
from helpers import load_config
from inline_dense.openmmlab.engine.padding_mask import PaddingMaskHandle, enable_padding_mask

TOY = Path(__file__).resolve().parents[2] / 'configs' / 'toy'


def built(name: str) -> torch.nn.Module:
    cfg = load_config(TOY / name)
    if 'ade' in name:
        from mmseg.registry import MODELS
        from mmseg.utils import register_all_modules
    else:
        from mmdet.registry import MODELS
        from mmdet.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    return MODELS.build(cfg.model)


@pytest.fixture
def no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.mark.parametrize('name', ['retinanet_inline-pvt-mini_fpn_toy-coco.py',
                                  'mask-rcnn_inline-deit-mini_simple-fpn_toy-coco.py',
                                  'upernet_inline-swin-mini_toy-ade.py'])
def test_del_frees_the_model_without_the_garbage_collector(name, no_gc):
    model = built(name).eval()
    handle = enable_padding_mask(model)
    assert isinstance(handle, PaddingMaskHandle)
    assert handle.backbones == [model.backbone]  # installed when the backbone was assigned
    with torch.no_grad():
        model.backbone(torch.zeros(1, 3, 64, 64))  # the hooks run
    refs = [weakref.ref(model), weakref.ref(model.backbone), weakref.ref(handle)]
    weights = weakref.ref(next(model.backbone.parameters()))
    del model, handle
    assert [r() for r in refs] == [None, None, None]
    assert weights() is None


def test_the_handle_still_removes_itself_and_forgets_a_freed_backbone(no_gc):
    model = built('retinanet_inline-pvt-mini_fpn_toy-coco.py')
    handle = enable_padding_mask(model)
    handle.remove()
    assert not model._forward_pre_hooks
    assert enable_padding_mask(model) is not handle  # removed: a new one
    other = built('retinanet_inline-pvt-mini_fpn_toy-coco.py').backbone
    handle.add_backbone(other)
    assert handle.backbones == [model.backbone, other]
    del other
    assert handle.backbones == [model.backbone]
