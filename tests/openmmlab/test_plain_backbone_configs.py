"""The plain backbone's configs (InLine-DeiT): ViTDet's Mask R-CNN / RetinaNet with the simple pyramid
(configs/vitdet/) and mmseg's ViT UperNet (configs/upernet/upernet_inline-deit-*): each loads with its
recipe, builds with two blocks, predicts; one of each trains a step through its optimizer wrapper
(layer-wise lr decay for ViTDet)."""
from pathlib import Path

import pytest
import torch
from mmengine.optim import build_optim_wrapper

from helpers import load_config

CONFIG_ROOT = Path(__file__).resolve().parents[2] / 'configs'
VITDET = sorted((CONFIG_ROOT / 'vitdet').glob('*.py'))
UPERNET = sorted((CONFIG_ROOT / 'upernet').glob('upernet_inline-deit-*.py'))
CONFIGS = VITDET + UPERNET
# what the paper's variants are, independent of the config files
WIDTH = {'t': 192, 's': 320, 'b': 384}
ARCH = {'t': 'tiny', 's': 'small', 'b': 'base'}
HW = (64, 96)
BLOCKS = {False: 2, True: 4}  # ViTDet's pyramid takes the last block; UperNet four blocks' maps

pytestmark = pytest.mark.usefixtures('one_thread')


def size_of(path: Path) -> str:
    return path.stem.split('_inline-deit-')[1][0]


def shrunk(path: Path):
    cfg = load_config(path)
    cfg.model.backbone.depth = BLOCKS[path in UPERNET]  # the real width
    cfg.model.backbone.init_cfg = None
    if path in UPERNET:
        cfg.model.backbone.out_indices = (0, 1, 2, 3)
    return cfg


def build(cfg):
    if cfg.default_scope == 'mmdet':
        from mmdet.registry import MODELS
        from mmdet.utils import register_all_modules
    else:
        from mmseg.registry import MODELS
        from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model


def test_the_expected_configs_exist():
    assert [p.name for p in VITDET] == [f'mask-rcnn_inline-deit-{s}_simple-fpn_lsj-100e_coco.py' for s in 'bst'] + [
        'retinanet_inline-deit-s_simple-fpn_lsj-100e_coco.py']
    assert [p.name for p in UPERNET] == [f'upernet_inline-deit-{s}_8xb2-160k_ade20k-512x512.py' for s in 'bst']


@pytest.mark.parametrize('path', VITDET, ids=[p.stem for p in VITDET])
def test_vitdet_recipe(path):
    cfg, s = load_config(path), size_of(path)
    backbone = cfg.model.backbone
    assert (backbone.type, backbone.arch, tuple(backbone.out_indices)) == ('InLineDeiT', ARCH[s], (-1,))
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint=f'inline://inline_deit_{s}')
    assert (backbone.with_cls_token, backbone.out_norm, backbone.drop_path_rate) == (False, False, 0.1)
    neck = cfg.model.neck
    assert (neck.type, neck.backbone_channel, neck.num_outs, neck.norm_cfg.type) == ('SimpleFPN', WIDTH[s], 5, 'LN2d')
    assert cfg.optim_wrapper.constructor == 'LayerDecayOptimWrapperConstructor'
    assert cfg.optim_wrapper.paramwise_cfg == dict(decay_rate=0.7)
    opt = cfg.optim_wrapper.optimizer
    assert (opt.type, opt.lr, opt.weight_decay) == ('AdamW', 1e-4, 0.1)
    assert cfg.train_cfg.max_iters == 184375
    assert cfg.auto_scale_lr.base_batch_size == 64
    assert cfg.train_dataloader.batch_size == 4
    milestones = next(s for s in cfg.param_scheduler if s.type == 'MultiStepLR').milestones
    assert milestones == [163889, 177546]
    pipeline = cfg.train_dataloader.dataset.dataset.pipeline
    resize = next(t for t in pipeline if t.type == 'RandomResize')
    assert (tuple(resize.scale), tuple(resize.ratio_range)) == ((1024, 1024), (0.1, 2.0))
    assert cfg.model.data_preprocessor.batch_augments[0].size == (1024, 1024)
    if path.stem.startswith('mask-rcnn'):
        assert cfg.model.type == 'MaskRCNN'
        assert cfg.model.rpn_head.num_convs == 2
        assert cfg.model.roi_head.bbox_head.type == 'Shared4Conv1FCBBoxHead'
    else:
        assert cfg.model.type == 'RetinaNet'
        assert cfg.val_evaluator.metric == 'bbox'
        assert cfg.model.bbox_head.anchor_generator.strides == [4, 8, 16, 32, 64]
    assert [h.type for h in cfg.custom_hooks] == ['InLinePaddingMaskHook', 'DeterministicResumeHook']
    assert cfg.default_hooks.checkpoint.type == 'AtomicCheckpointHook'


@pytest.mark.parametrize('path', UPERNET, ids=[p.stem for p in UPERNET])
def test_upernet_recipe(path):
    cfg, s = load_config(path), size_of(path)
    backbone, width = cfg.model.backbone, WIDTH[size_of(path)]
    assert (backbone.type, backbone.arch, tuple(backbone.out_indices)) == ('InLineDeiT', ARCH[s], (2, 5, 8, 11))
    assert (backbone.with_cls_token, backbone.drop_path_rate) == (True, 0.1)
    assert cfg.model.neck.type == 'MultiLevelNeck'
    assert cfg.model.neck.scales == [4, 2, 1, 0.5]
    assert cfg.model.neck.in_channels == [width] * 4
    assert cfg.model.neck.out_channels == width
    assert cfg.model.decode_head.in_channels == [width] * 4
    assert cfg.model.auxiliary_head.in_channels == width
    opt = cfg.optim_wrapper.optimizer
    assert (opt.lr, opt.weight_decay) == (6e-5, 0.01)
    assert cfg.train_cfg.max_iters == 160000
    assert set(cfg.optim_wrapper.paramwise_cfg.custom_keys) >= {'norm', 'pos_embed', 'cls_token'}


def _inputs(model, scope):
    img = torch.randint(0, 256, (3, *HW), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    meta = dict(img_shape=HW, ori_shape=HW, scale_factor=(1.0, 1.0), pad_shape=HW)
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample
        sample = DetDataSample(metainfo=meta)
    else:
        from mmseg.structures import SegDataSample
        sample = SegDataSample(metainfo=meta)
    return model.data_preprocessor(dict(inputs=[img], data_samples=[sample]), training=False)


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_builds_and_predicts(path):
    cfg = shrunk(path)
    model = build(cfg).eval()
    assert len(model.backbone.stages) == BLOCKS[path in UPERNET]
    assert model.backbone.stages[0].blocks[0].norm1.weight.numel() == WIDTH[size_of(path)]
    data = _inputs(model, cfg.default_scope)
    with torch.no_grad():
        results = model(**data, mode='predict')
    assert len(results) == 1
    if cfg.default_scope == 'mmdet':
        pred = results[0].pred_instances
        assert pred.bboxes.shape[1] == 4
        assert len(pred.scores) == len(pred.bboxes)
        if path.stem.startswith('mask-rcnn'):
            assert pred.masks.shape[1:] == HW
    else:
        seg = results[0].pred_sem_seg.data
        assert seg.shape == (1, *HW)
        assert int(seg.min()) >= 0
        assert int(seg.max()) < 150


def _train_batch(model, scope):
    g = torch.Generator().manual_seed(0)
    img = torch.randint(0, 256, (3, *HW), dtype=torch.uint8, generator=g)
    meta = dict(img_shape=HW, ori_shape=HW, scale_factor=(1.0, 1.0), pad_shape=HW, batch_input_shape=HW)
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample
        from mmdet.structures.mask import BitmapMasks
        from mmengine.structures import InstanceData
        sample = DetDataSample(metainfo=meta)
        masks = torch.zeros(1, *HW, dtype=torch.uint8)
        masks[0, 8:40, 10:60] = 1
        sample.gt_instances = InstanceData(bboxes=torch.tensor([[10.0, 8.0, 60.0, 40.0]]), labels=torch.tensor([3]),
                                           masks=BitmapMasks(masks.numpy(), *HW))
    else:
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        sample = SegDataSample(metainfo=meta)
        sample.gt_sem_seg = PixelData(data=torch.randint(0, 150, (1, *HW), generator=g))
    return dict(inputs=[img, img.flip(-1)], data_samples=[sample, sample.clone()])  # BN's pooled map: >= 2


@pytest.mark.parametrize('path', [VITDET[0], UPERNET[0]], ids=[VITDET[0].stem, UPERNET[0].stem])
def test_one_training_step(path):
    cfg = shrunk(path)
    if cfg.default_scope == 'mmdet':  # 1024x1024 fixed padding is the recipe's; a 64x96 step needs none
        cfg.model.data_preprocessor.batch_augments = None
    else:  # SyncBN without a process group
        cfg.model.decode_head.norm_cfg = cfg.model.auxiliary_head.norm_cfg = dict(type='BN', requires_grad=True)
    model = build(cfg).train()
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    before = model.backbone.patch_embed.proj.weight.detach().clone()
    losses = model.train_step(_train_batch(model, cfg.default_scope), wrapper)
    assert losses
    assert all(torch.isfinite(v) for v in losses.values())
    assert not torch.equal(model.backbone.patch_embed.proj.weight, before)
    if path in VITDET:  # the stem's lr: 0.7 ** 3 with two blocks
        lrs = {g['lr'] for g in wrapper.optimizer.param_groups}
        assert min(lrs) == pytest.approx(1e-4 * 0.7 ** 3)
        assert max(lrs) == pytest.approx(1e-4)
