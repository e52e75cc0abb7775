"""Every COCO-panoptic and Cityscapes config (Mask2Former panoptic; Mask2Former and UperNet on Cityscapes)
takes a training step with shrunk depths: its losses are finite and reach every trainable backbone weight.
Their recipes and predictions are checked in test_query_head_configs.py and test_configs.py."""
from pathlib import Path

import pytest
import torch

from helpers import load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted([*(ROOT / 'configs').glob('*/*_coco-panoptic.py'),
                  *(ROOT / 'configs').glob('*/*_cityscapes-512x1024.py')])
SHRUNK = {'InLineSwin': (1, 1, 3, 1), 'InLineCSwin': (1, 1, 1, 1)}
HW = (64, 128)  # 1:2, as Cityscapes' images and crops
pytestmark = pytest.mark.usefixtures('one_thread')


def test_the_configs_cover_both_tasks():
    names = [p.name for p in CONFIGS]
    assert sum(n.endswith('_coco-panoptic.py') for n in names) >= 6
    assert sum(n.endswith('_cityscapes-512x1024.py') for n in names) >= 8


def _build(path: Path):
    """The config's model with fewer backbone blocks, no padding to the recipe's crop and, for Mask2Former, a
    smaller head (fewer queries, layers and sampled points): the same modules and losses at a test's cost."""
    cfg = load_config(path)
    cfg.model.backbone.depths = SHRUNK[cfg.model.backbone.type]
    cfg.model.backbone.init_cfg = None
    # the recipes pad every training batch to their crop (1024x1024, 512x1024): the test's images stay small
    if cfg.default_scope == 'mmdet':
        cfg.model.data_preprocessor.batch_augments = None
    else:
        cfg.model.data_preprocessor.size = HW
    head = cfg.model.get('panoptic_head') or cfg.model.decode_head
    if head.type.endswith('Mask2FormerHead'):
        head.num_queries = 10
        head.pixel_decoder.encoder.num_layers = 1
        head.transformer_decoder.num_layers = 2
        train_cfg = cfg.model.train_cfg if 'panoptic_head' in cfg.model else head.train_cfg
        train_cfg.num_points = 256
    if cfg.default_scope == 'mmdet':
        from mmdet.registry import MODELS
        from mmdet.utils import register_all_modules
    else:
        from mmseg.registry import MODELS
        from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return cfg, model


def _panoptic_sample(meta: dict):
    """Two things (classes 0 and 3) and two stuff regions (classes 80 and 100) covering the rest."""
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData, PixelData
    h, w = HW
    masks = torch.zeros(2, h, w, dtype=torch.uint8)
    masks[0, 5:30, 10:40] = 1
    masks[1, 30:60, 60:110] = 1
    sample = DetDataSample(metainfo=meta)
    sample.gt_instances = InstanceData(bboxes=torch.tensor([[10., 5., 40., 30.], [60., 30., 110., 60.]]),
                                       labels=torch.tensor([0, 3]), masks=BitmapMasks(masks.numpy(), h, w))
    sem = torch.full((1, h, w), 80, dtype=torch.long)
    sem[:, h // 2:] = 100
    sem[:, masks[0].bool()] = 0
    sem[:, masks[1].bool()] = 3
    sample.gt_sem_seg = PixelData(sem_seg=sem)
    return sample


def _semantic_sample(meta: dict):
    """Cityscapes train ids 0 (road), 13 (car) and 255 (ignored)."""
    from mmengine.structures import PixelData
    from mmseg.structures import SegDataSample
    h, w = HW
    seg = torch.zeros(1, h, w, dtype=torch.long)
    seg[:, 10:40, 20:90] = 13
    seg[:, :4] = 255
    sample = SegDataSample(metainfo=meta)
    sample.gt_sem_seg = PixelData(data=seg)
    return sample


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_a_training_step(path: Path):
    cfg, model = _build(path)
    model.train()
    meta = dict(img_shape=HW, ori_shape=HW, pad_shape=HW, scale_factor=(1.0, 1.0), batch_input_shape=HW)
    make_sample = _panoptic_sample if cfg.default_scope == 'mmdet' else _semantic_sample
    # two images: UperNet's pooling module normalises 1x1 maps over the batch
    imgs = list(torch.randint(0, 256, (2, 3, *HW), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)))
    data = model.data_preprocessor(dict(inputs=imgs, data_samples=[make_sample(meta) for _ in imgs]), training=True)
    losses = model(**data, mode='loss')
    total = sum(v.sum() for k, v in losses.items() if 'loss' in k)
    total.backward()
    assert torch.isfinite(total)
    assert all(p.grad is not None for p in model.backbone.parameters() if p.requires_grad)
