"""mmdet and mmseg build working models from their installed base configs, and
``import inline_dense.openmmlab`` puts the InLine backbones into both registries."""
import math

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

import inline_dense.openmmlab


@pytest.fixture(scope='module')
def det_models():
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    return MODELS


@pytest.fixture(scope='module')
def seg_models():
    from mmseg.registry import MODELS
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    return MODELS


@pytest.mark.parametrize('registry_module', ['mmdet.registry', 'mmseg.registry'])
@pytest.mark.parametrize('name', ['InLineSwin', 'InLinePVT'])
def test_inline_backbones_are_registered(registry_module, name):
    import importlib
    registry = importlib.import_module(registry_module).MODELS
    assert registry.get(name) is getattr(inline_dense.openmmlab, name)


def config_inheriting(tmp_path, base: str, overrides: str) -> Config:
    """A config file that inherits an installed package's config, as this project's configs do."""
    path = tmp_path / 'cfg.py'
    path.write_text(f"_base_ = '{base}'\n{overrides}\n")
    return Config.fromfile(str(path))


def test_mmdet_retinanet_from_installed_config(det_models, tmp_path):
    from mmdet.structures import DetDataSample
    # init_cfg=None: no download of ImageNet weights
    cfg = config_inheriting(tmp_path, 'mmdet::retinanet/retinanet_r18_fpn_1x_coco.py',
                            'model = dict(backbone=dict(init_cfg=None))')
    assert cfg.model.backbone.depth == 18
    assert cfg.model.backbone.init_cfg is None
    with DefaultScope.overwrite_default_scope('mmdet'):
        model = det_models.build(cfg.model).eval()

    size = 64
    x = torch.rand(1, 3, size, size)
    with torch.no_grad():
        cls_scores, bbox_preds = model.bbox_head(model.extract_feat(x))
    head = cfg.model.bbox_head
    anchors = len(head.anchor_generator.ratios) * head.anchor_generator.scales_per_octave
    strides = head.anchor_generator.strides
    assert [s.shape[-1] for s in cls_scores] == [math.ceil(size / s) for s in strides]
    assert {s.shape[1] for s in cls_scores} == {anchors * head.num_classes}
    assert {b.shape[1] for b in bbox_preds} == {anchors * 4}

    # predict() runs mmcv's compiled batched NMS on CPU.
    sample = DetDataSample(metainfo=dict(img_shape=(size, size), ori_shape=(size, size), scale_factor=(1., 1.)))
    with torch.no_grad():
        result = model.predict(x, [sample])[0].pred_instances
    assert len(result.bboxes) <= cfg.model.test_cfg.max_per_img
    assert result.bboxes.shape[1:] == (4,)
    assert len(result.scores) == len(result.labels) == len(result.bboxes)
    assert (result.bboxes >= 0).all()
    assert (result.bboxes <= size).all()


def test_mmseg_pspnet_from_installed_config(seg_models, tmp_path):
    from mmseg.structures import SegDataSample
    # pretrained=None: no download of ImageNet weights
    cfg = config_inheriting(tmp_path, 'mmseg::pspnet/pspnet_r18-d8_4xb4-80k_loveda-512x512.py',
                            'model = dict(pretrained=None, data_preprocessor=None)')
    assert cfg.model.backbone.depth == 18
    assert cfg.model.pretrained is None
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = seg_models.build(cfg.model).eval()

    h, w = 48, 64
    x = torch.rand(1, 3, h, w)
    num_classes = cfg.model.decode_head.num_classes
    with torch.no_grad():
        logits = model(x, mode='tensor')
    # d8: the dilated ResNet keeps 1/8 of the input resolution.
    assert logits.shape == (1, num_classes, h // 8, w // 8)

    sample = SegDataSample(metainfo=dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w)))
    with torch.no_grad():
        pred = model.predict(x, [sample])[0]
    assert pred.seg_logits.data.shape == (num_classes, h, w)
    assert pred.pred_sem_seg.data.shape == (1, h, w)
    torch.testing.assert_close(pred.pred_sem_seg.data[0], pred.seg_logits.data.argmax(0))
