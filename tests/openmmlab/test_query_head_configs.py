"""configs/dino and configs/mask2former: each names its recipe and variant, builds with one block
per stage, predicts, and a DINO and a Mask2Former take a training step on the mmcv-lite stand-in
through the compiled-op path (mmcv takes it on CUDA; forced here on CPU)."""
from pathlib import Path

import pytest
import torch

from helpers import load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted([*(ROOT / 'configs' / 'dino').glob('*.py'), *(ROOT / 'configs' / 'mask2former').glob('*.py')])
CHANNELS = {('swin', 't'): [96, 192, 384, 768], ('swin', 's'): [96, 192, 384, 768],
            ('swin', 'b'): [128, 256, 512, 1024], ('cswin', 't'): [64, 128, 256, 512],
            ('cswin', 's'): [64, 128, 256, 512], ('cswin', 'b'): [96, 192, 384, 768]}
SIZES = {'t': 'tiny', 's': 'small', 'b': 'base'}
SHRUNK = {'swin': (1, 1, 3, 1), 'cswin': (1, 1, 1, 1)}
pytestmark = pytest.mark.usefixtures('one_thread')


def _variant(path: Path):
    kind, size = path.stem.split('_')[1].split('-')[1:]
    return kind, size


def test_every_expected_config_exists():
    expected = ({f'dino-4scale_inline-{k}-{s}_8xb2-{e}_coco.py' for k in ('swin', 'cswin') for s in 'tsb'
                 for e in ('12e', '24e')}
                | {f'mask2former_inline-swin-{s}_8xb2-lsj-50e_coco.py' for s in 'tsb'}
                | {f'mask2former_inline-{k}-{s}_8xb2-160k_ade20k-512x512.py' for k in ('swin', 'cswin') for s in 'tsb'}
                | {f'mask2former_inline-{k}-{s}_8xb2-lsj-50e_coco-panoptic.py'
                   for k in ('swin', 'cswin') for s in 'tsb'}
                | {f'mask2former_inline-swin-{s}_8xb2-90k_cityscapes-512x1024.py' for s in 'tsb'}
                | {'mask2former_inline-cswin-t_8xb2-90k_cityscapes-512x1024.py'})
    assert {p.name for p in CONFIGS} == expected


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_recipe(path: Path):
    cfg = load_config(path)
    kind, size = _variant(path)
    backbone = cfg.model.backbone
    assert backbone.type == {'swin': 'InLineSwin', 'cswin': 'InLineCSwin'}[kind]
    assert backbone.arch == SIZES[size]
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint=f'inline://inline_{kind}_{size}')
    assert cfg.custom_imports.imports[0] == 'inline_dense.openmmlab'
    assert [h.type for h in cfg.custom_hooks] == ['InLinePaddingMaskHook', 'DeterministicResumeHook']
    assert cfg.default_hooks.checkpoint.type == 'AtomicCheckpointHook'
    keys = cfg.optim_wrapper.paramwise_cfg.custom_keys
    assert keys['backbone'].lr_mult == 0.1
    assert keys['backbone.stages.2.blocks.28.norm'].decay_mult == 0.0
    channels = CHANNELS[(kind, size)]
    opt = cfg.optim_wrapper.optimizer
    if path.stem.startswith('dino'):
        assert tuple(backbone.out_indices) == (1, 2, 3)
        assert cfg.model.neck.in_channels == channels[1:]
        assert cfg.model.neck.num_outs == 4
        assert cfg.model.type == 'DINO'
        assert (opt.lr, opt.weight_decay) == (1e-4, 1e-4)
        epochs = 12 if '12e' in path.stem else 24
        assert cfg.train_cfg.max_epochs == epochs
        assert cfg.param_scheduler[0].milestones == ([11] if epochs == 12 else [20])
    elif path.stem.endswith('coco'):
        assert cfg.model.panoptic_head.in_channels == channels
        assert cfg.model.type == 'Mask2Former'
        assert (opt.lr, opt.weight_decay, cfg.train_cfg.max_iters) == (1e-4, 0.05, 368750)
    elif path.stem.endswith('coco-panoptic'):  # COCO panoptic: 80 things, 53 stuff, PQ
        head = cfg.model.panoptic_head
        assert head.in_channels == channels
        assert (head.num_things_classes, head.num_stuff_classes) == (80, 53)
        assert cfg.model.test_cfg.panoptic_on
        assert cfg.model.type == 'Mask2Former'
        assert (opt.lr, opt.weight_decay, cfg.train_cfg.max_iters) == (1e-4, 0.05, 368750)
        assert 'CocoPanopticMetric' in [m.type for m in cfg.val_evaluator]
    else:
        on_cityscapes = path.stem.endswith('cityscapes-512x1024')
        assert cfg.model.decode_head.in_channels == channels
        assert cfg.model.decode_head.num_classes == (19 if on_cityscapes else 150)
        assert cfg.model.test_cfg.mode == 'whole'
        assert (opt.lr, opt.weight_decay, cfg.train_cfg.max_iters, cfg.crop_size) == (
            (1e-4, 0.05, 90000, (512, 1024)) if on_cityscapes else (1e-4, 0.05, 160000, (512, 512)))
    assert cfg.train_dataloader.batch_size == 2


def _build(path: Path):
    cfg = load_config(path)
    kind, _ = _variant(path)
    cfg.model.backbone.depths = SHRUNK[kind]
    cfg.model.backbone.init_cfg = None
    if cfg.model.type == 'DINO':  # DINO picks num_queries encoder tokens: a 64x96 image has 128
        cfg.model.num_queries = 50
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


def _data(model, scope: str, train: bool, hw=(64, 96)):
    img = torch.randint(0, 256, (3, *hw), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    meta = dict(img_shape=hw, ori_shape=hw, pad_shape=hw, scale_factor=(1.0, 1.0), batch_input_shape=hw)
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample
        from mmengine.structures import InstanceData
        sample = DetDataSample(metainfo=meta)
        if train:
            from mmdet.structures.mask import BitmapMasks
            masks = torch.zeros(2, *hw, dtype=torch.uint8)
            masks[0, 5:30, 10:40] = 1
            masks[1, 30:60, 50:90] = 1
            sample.gt_instances = InstanceData(bboxes=torch.tensor([[10., 5., 40., 30.], [50., 30., 90., 60.]]),
                                               labels=torch.tensor([0, 3]), masks=BitmapMasks(masks.numpy(), *hw))
    else:
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        sample = SegDataSample(metainfo=meta)
        seg = torch.zeros(1, *hw, dtype=torch.long)
        seg[:, 10:40, 20:60] = 7
        sample.gt_sem_seg = PixelData(data=seg)
    return model.data_preprocessor(dict(inputs=[img], data_samples=[sample]), training=train)


@pytest.mark.parametrize('path', CONFIGS, ids=[p.stem for p in CONFIGS])
def test_builds_and_predicts(path: Path):
    cfg, model = _build(path)
    kind, _ = _variant(path)
    assert [len(s.blocks) for s in model.backbone.stages] == list(SHRUNK[kind])
    model.eval()
    with torch.no_grad():
        results = model(**_data(model, cfg.default_scope, False), mode='predict')
    assert len(results) == 1
    if cfg.default_scope == 'mmdet':
        pred = results[0].pred_instances
        assert pred.bboxes.shape[1] == 4
        assert len(pred.scores) == len(pred.bboxes)
    else:
        seg = results[0].pred_sem_seg.data
        assert seg.shape == (1, 64, 96)
        assert int(seg.min()) >= 0
        assert int(seg.max()) < 150


@pytest.mark.parametrize('name', ['dino/dino-4scale_inline-swin-t_8xb2-12e_coco.py',
                                  'mask2former/mask2former_inline-swin-t_8xb2-lsj-50e_coco.py',
                                  'mask2former/mask2former_inline-cswin-t_8xb2-160k_ade20k-512x512.py'])
def test_a_training_step_runs_on_the_stand_in_ops(name, monkeypatch):
    """The compiled-op path (as on CUDA): every op the step calls is one the stand-in serves."""
    import mmcv.ops.multi_scale_deform_attn as msda

    from inline_dense.openmmlab.mmcv_ops import mmcv_ext
    ext = mmcv_ext()
    if not getattr(ext, 'IS_STAND_IN', False):
        pytest.skip('compiled mmcv here')
    cfg, model = _build(ROOT / 'configs' / name)
    model.train()
    data = _data(model, cfg.default_scope, True)
    monkeypatch.setattr(msda, 'IS_CUDA_AVAILABLE', True)
    monkeypatch.setattr(torch.Tensor, 'is_cuda', property(lambda self: True))
    before = dict(ext.CALLS)
    losses = model(**data, mode='loss')
    total = sum(v.sum() for k, v in losses.items() if 'loss' in k)
    total.backward()
    monkeypatch.undo()
    called = {k for k, v in ext.CALLS.items() if v > before.get(k, 0)}
    assert {'ms_deform_attn_forward', 'ms_deform_attn_backward'} <= called
    assert called <= set(ext.SERVED), called
    assert torch.isfinite(total)
    assert all(p.grad is not None for p in model.backbone.parameters() if p.requires_grad)
