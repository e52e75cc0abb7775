"""The COCO / ADE20K configs: each loads, builds, runs a test-mode forward on CPU and
carries its recipe; the per-variant checkpoint short names (``inline://<variant>``) and their
command-line override.

Models are built with the backbone shrunk (fewer blocks, real widths, so the neck and
head wiring stays the real one) and without pretrained weights.
"""
import argparse
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import torch
from mmengine.config import Config, DictAction
from mmengine.optim import build_optim_wrapper

from helpers import load_config

CONFIG_ROOT = Path(__file__).resolve().parents[2] / 'configs'
# bases are not runnable; toy configs have their own tests; the query-based heads (DINO,
# Mask2Former) are tested in tests/openmmlab/test_query_head_configs.py; the plain backbone's (ViTDet,
# UperNet with InLine-DeiT) in tests/openmmlab/test_plain_backbone_configs.py
SKIPPED_DIRS = {'_base_', 'toy', 'dino', 'mask2former', 'vitdet'}
CONFIGS = sorted(p for p in CONFIG_ROOT.rglob('*.py')
                 if not SKIPPED_DIRS & set(p.relative_to(CONFIG_ROOT).parts) and '_inline-deit-' not in p.name)
IDS = [p.stem for p in CONFIGS]

# What the paper's variants are, independent of the config files.
SIZES = {'t': 'tiny', 's': 'small', 'm': 'medium', 'b': 'base', 'l': 'large'}
CHANNELS = {
    ('swin', 't'): [96, 192, 384, 768], ('swin', 's'): [96, 192, 384, 768],
    ('swin', 'b'): [128, 256, 512, 1024],
    **{('pvt', s): [64, 128, 320, 512] for s in 'tsml'},
    ('cswin', 't'): [64, 128, 256, 512], ('cswin', 's'): [64, 128, 256, 512],
    ('cswin', 'b'): [96, 192, 384, 768],
}
BACKBONES = {'swin': 'InLineSwin', 'pvt': 'InLinePVT', 'cswin': 'InLineCSwin'}
# Detection drop path per variant; CSWin publishes no detection settings: Swin's per size.
DET_DROP_PATH = {('swin', 't'): 0.2, ('swin', 's'): 0.3, ('swin', 'b'): 0.3, **{('pvt', s): 0.1 for s in 'tsml'},
                 ('cswin', 't'): 0.2, ('cswin', 's'): 0.3, ('cswin', 'b'): 0.3}
# CSWin's own ADE20K (UperNet) configs: drop path per size.
CSWIN_SEG_DROP_PATH = {('cswin', 't'): 0.3, ('cswin', 's'): 0.4, ('cswin', 'b'): 0.6}
# Blocks per stage of the shrunk backbones: InLine-Swin-B's 'IIMS2' needs >= 3 blocks in
# stage 2 (2 InLine then softmax), which also keeps a softmax block in every Swin variant.
# InLine-CSwin ('IISS'): one block per stage still has both kinds of attention.
SHRUNK_DEPTHS = {'swin': (1, 1, 3, 1), 'pvt': (1, 1, 1, 1), 'cswin': (1, 1, 1, 1)}

# Expected recipe per config family (the part of the name before the variant).
SWIN_1X = dict(scope='mmdet', lr=1e-4, wd=0.05, epochs=12, milestones=[8, 11], warmup=1000, batch=2)
SWIN_3X = dict(SWIN_1X, epochs=36, milestones=[27, 33])
RECIPES = {
    'mask-rcnn_swin_1x': dict(SWIN_1X, detector='MaskRCNN'),
    'mask-rcnn_swin_ms-crop-3x': dict(SWIN_3X, detector='MaskRCNN'),
    # InLine-CSwin detection: the Swin recipes (CSWin publishes no detection configs)
    'mask-rcnn_cswin_1x': dict(SWIN_1X, detector='MaskRCNN'),
    'mask-rcnn_cswin_ms-crop-3x': dict(SWIN_3X, detector='MaskRCNN'),
    'cascade-mask-rcnn_swin_1x': dict(SWIN_1X, detector='CascadeRCNN'),
    'cascade-mask-rcnn_swin_ms-crop-3x': dict(SWIN_3X, detector='CascadeRCNN'),
    'cascade-mask-rcnn_cswin_ms-crop-3x': dict(SWIN_3X, detector='CascadeRCNN'),
    'mask-rcnn_pvt_1x': dict(scope='mmdet', detector='MaskRCNN', lr=2e-4, wd=1e-4, epochs=12,
                             milestones=[8, 11], warmup=500, batch=2),
    'retinanet_swin_1x': dict(scope='mmdet', detector='RetinaNet', lr=1e-4, wd=0.05, epochs=12,
                              milestones=[8, 11], warmup=1000, batch=2),
    'retinanet_pvt_1x': dict(scope='mmdet', detector='RetinaNet', lr=1e-4, wd=1e-4, epochs=12,
                             milestones=[8, 11], warmup=500, batch=2),
    'fpn_pvt_80k': dict(scope='mmseg', lr=2e-4, wd=1e-4, iters=80000, warmup=0, poly_power=0.9,
                        batch=4, drop_path=0.1),
    'upernet_swin_160k': dict(scope='mmseg', lr=6e-5, wd=0.01, iters=160000, warmup=1500, poly_power=1.0,
                              batch=2, drop_path=0.3),
    # CSWin's own UperNet recipe (= Swin's), its drop path per size
    'upernet_cswin_160k': dict(scope='mmseg', lr=6e-5, wd=0.01, iters=160000, warmup=1500, poly_power=1.0,
                               batch=2, drop_path=CSWIN_SEG_DROP_PATH),
    # the Semantic FPN recipe of the PVT configs (CSWin publishes none), CSWin's ADE20K drop path
    'fpn_cswin_80k': dict(scope='mmseg', lr=2e-4, wd=1e-4, iters=80000, warmup=0, poly_power=0.9,
                          batch=4, drop_path=CSWIN_SEG_DROP_PATH),
    # Cityscapes: the Swin UperNet optimiser on mmseg's 80k Cityscapes schedule, 512x1024 crops, 19
    # classes, tested on the whole image
    'upernet_swin_cityscapes-80k': dict(scope='mmseg', lr=6e-5, wd=0.01, iters=80000, warmup=1500, poly_power=1.0,
                                        batch=2, drop_path=0.3, classes=19, crop=(512, 1024), test_mode='whole'),
    'upernet_cswin_cityscapes-80k': dict(scope='mmseg', lr=6e-5, wd=0.01, iters=80000, warmup=1500,
                                         poly_power=1.0, batch=2, drop_path=CSWIN_SEG_DROP_PATH, classes=19,
                                         crop=(512, 1024), test_mode='whole'),
}
NAME = re.compile(r'^(?P<model>mask-rcnn|cascade-mask-rcnn|retinanet|fpn|upernet)_inline-(?P<kind>swin|pvt|cswin)-'
                  r'(?P<size>[tsmbl])_'
                  r'(?:fpn_)?(?P<schedule>1x|ms-crop-3x|4xb4-80k|8xb2-80k|8xb2-160k)_'
                  r'(?P<data>coco|ade20k-512x512|cityscapes-512x1024)$')


def parse_name(path: Path) -> dict:
    m = NAME.match(path.stem)
    assert m, f'{path.name} does not follow <model>_inline-<swin|pvt|cswin>-<size>_..._<schedule>_<dataset>.py'
    info = m.groupdict()
    schedule = {'4xb4-80k': '80k', '8xb2-80k': 'cityscapes-80k', '8xb2-160k': '160k'}.get(info['schedule'],
                                                                                       info['schedule'])
    info['family'] = f"{info['model']}_{info['kind']}_{schedule}"
    info['variant'] = (info['kind'], info['size'])
    return info


# These models see tiny inputs: intra-op threads only add overhead on shared cores.
pytestmark = pytest.mark.usefixtures('one_thread')


def load(path: Path) -> Config:
    """A fresh copy of the config, read once per session (helpers.load_config)."""
    return load_config(path)


def shrink(cfg: Config, kind: str, keep_init: bool = False) -> Config:
    """Fewer blocks per stage (same widths); no pretrained file unless ``keep_init``."""
    cfg.model.backbone.depths = SHRUNK_DEPTHS[kind]
    if not keep_init:
        cfg.model.backbone.init_cfg = None
    return cfg


def build(cfg: Config, part: str = '') -> torch.nn.Module:
    """Builds ``cfg.model`` (or its ``part``, e.g. 'backbone') through the registry of the config's
    default scope."""
    if cfg.default_scope == 'mmdet':
        from mmdet.registry import MODELS
        from mmdet.utils import register_all_modules
    else:
        from mmseg.registry import MODELS
        from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    return MODELS.build(cfg.model[part] if part else cfg.model)


def test_every_expected_config_exists():
    names = {p.name for p in CONFIGS}
    expected = (
        [f'mask-rcnn_inline-swin-{s}_fpn_1x_coco.py' for s in 'tsb']
        + [f'mask-rcnn_inline-pvt-{s}_fpn_1x_coco.py' for s in 'tsml']
        + [f'mask-rcnn_inline-swin-{s}_fpn_ms-crop-3x_coco.py' for s in 'ts']
        + [f'retinanet_inline-pvt-{s}_fpn_1x_coco.py' for s in 'tsml']
        + ['retinanet_inline-swin-t_fpn_1x_coco.py']
        + [f'fpn_inline-pvt-{s}_4xb4-80k_ade20k-512x512.py' for s in 'tsml']
        + [f'upernet_inline-swin-{s}_8xb2-160k_ade20k-512x512.py' for s in 'tsb']
        # InLine-CSwin (15) and Cascade Mask R-CNN with InLine-Swin (4)
        + [f'mask-rcnn_inline-cswin-{s}_fpn_1x_coco.py' for s in 'tsb']
        + [f'mask-rcnn_inline-cswin-{s}_fpn_ms-crop-3x_coco.py' for s in 'tsb']
        + [f'cascade-mask-rcnn_inline-cswin-{s}_fpn_ms-crop-3x_coco.py' for s in 'tsb']
        + [f'upernet_inline-cswin-{s}_8xb2-160k_ade20k-512x512.py' for s in 'tsb']
        + [f'fpn_inline-cswin-{s}_4xb4-80k_ade20k-512x512.py' for s in 'tsb']
        + ['cascade-mask-rcnn_inline-swin-t_fpn_1x_coco.py']
        + [f'cascade-mask-rcnn_inline-swin-{s}_fpn_ms-crop-3x_coco.py' for s in 'tsb']
        # Cityscapes UperNet: InLine-Swin-T/S/B and InLine-CSwin-T
        + [f'upernet_inline-swin-{s}_8xb2-80k_cityscapes-512x1024.py' for s in 'tsb']
        + ['upernet_inline-cswin-t_8xb2-80k_cityscapes-512x1024.py'])
    assert sorted(set(expected) - names) == [], 'missing configs'
    assert sorted(names - set(expected)) == [], 'configs this test does not know'


@pytest.mark.parametrize('path', CONFIGS, ids=IDS)
def test_recipe(path: Path):
    info = parse_name(path)
    recipe = RECIPES[info['family']]
    cfg = load(path)
    assert cfg.default_scope == recipe['scope']
    assert cfg.custom_imports == dict(imports=['inline_dense.openmmlab'], allow_failed_imports=False)

    backbone = cfg.model.backbone
    assert backbone.type == BACKBONES[info['kind']]
    assert backbone.arch == SIZES[info['size']]
    kind, size = info['variant']
    assert backbone.init_cfg == dict(type='Pretrained', checkpoint=f'inline://inline_{kind}_{size}')
    channels = CHANNELS[info['variant']]
    if info['model'] in ('mask-rcnn', 'cascade-mask-rcnn', 'fpn'):
        assert tuple(backbone.out_indices) == (0, 1, 2, 3)
        assert cfg.model.neck.in_channels == channels
    elif info['model'] == 'retinanet':  # the stride-4 map is not used: not returned either
        assert tuple(backbone.out_indices) == (1, 2, 3)
        assert cfg.model.neck.in_channels == channels[1:]
        assert cfg.model.neck.start_level == 0
    else:
        assert cfg.model.decode_head.in_channels == channels
        assert cfg.model.auxiliary_head.in_channels == channels[2]
    drop_path = recipe.get('drop_path', DET_DROP_PATH)
    assert backbone.drop_path_rate == (drop_path[info['variant']] if isinstance(drop_path, dict) else drop_path)

    optimizer = cfg.optim_wrapper.optimizer
    assert optimizer.type == 'AdamW'
    assert optimizer.lr == pytest.approx(recipe['lr'])
    assert optimizer.weight_decay == pytest.approx(recipe['wd'])
    assert set(cfg.optim_wrapper.paramwise_cfg.custom_keys) >= {'norm', 'relative_position_bias_table', 'pos_embed'}
    assert cfg.train_dataloader.batch_size == recipe['batch']
    # the runtime bases (configs/_base_/inline_runtime_mm{det,seg}.py)
    assert [h.type for h in cfg.custom_hooks] == ['InLinePaddingMaskHook', 'DeterministicResumeHook']
    assert cfg.default_hooks.checkpoint.type == 'AtomicCheckpointHook'

    schedulers = {s.type: s for s in cfg.param_scheduler}
    warmup = schedulers.get('LinearLR')
    assert (warmup.end if warmup else 0) == recipe['warmup']
    if recipe['scope'] == 'mmdet':
        assert cfg.model.type == recipe['detector']
        assert cfg.train_cfg.max_epochs == recipe['epochs']
        assert schedulers['MultiStepLR'].milestones == recipe['milestones']
        assert schedulers['MultiStepLR'].end == recipe['epochs']
        assert cfg.auto_scale_lr.base_batch_size == 16
        multi_scale = any(t.type == 'RandomChoice' for t in cfg.train_dataloader.dataset.pipeline)
        assert multi_scale == (info['schedule'] == 'ms-crop-3x')
    else:
        assert cfg.train_cfg.max_iters == recipe['iters']
        poly = schedulers['PolyLR']
        assert (poly.power, poly.eta_min, poly.begin, poly.end) == (recipe['poly_power'], 0.0, recipe['warmup'],
                                                                    recipe['iters'])
        heads = [cfg.model.decode_head, *([cfg.model.auxiliary_head] if 'auxiliary_head' in cfg.model else [])]
        assert [h.num_classes for h in heads] == [recipe.get('classes', 150)] * len(heads)
        assert cfg.crop_size == recipe.get('crop', (512, 512))
        assert cfg.model.test_cfg.mode == recipe.get('test_mode', 'whole')


# One config per recipe family (model, backbone kind, schedule): the settings these tests
# look at live in the family's base; dumping is slow (yapf), so not all 40.
FAMILY_CASES = sorted({parse_name(p)['family']: p for p in CONFIGS}.values())


@pytest.mark.parametrize('path', FAMILY_CASES, ids=[p.stem for p in FAMILY_CASES])
def test_config_survives_dump(path: Path, tmp_path: Path):
    """Runners save the config to the work dir; the saved file must load to the same config."""
    cfg = load(path)
    out = tmp_path / path.name
    cfg.dump(str(out))
    again = Config.fromfile(str(out))
    assert again.model.to_dict() == cfg.model.to_dict()
    assert again.optim_wrapper.to_dict() == cfg.optim_wrapper.to_dict()


def _inputs(model: torch.nn.Module, scope: str, hw=(64, 96)) -> dict[str, object]:
    """One uint8 image with its data sample, through the model's data preprocessor."""
    img = torch.randint(0, 256, (3, *hw), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    meta = dict(img_shape=hw, ori_shape=hw, scale_factor=(1.0, 1.0))
    if scope == 'mmdet':
        from mmdet.structures import DetDataSample
        sample = DetDataSample(metainfo=meta)
    else:
        from mmseg.structures import SegDataSample
        sample = SegDataSample(metainfo=meta)
    return model.data_preprocessor(dict(inputs=[img], data_samples=[sample]), training=False)


@pytest.mark.parametrize('path', CONFIGS, ids=IDS)
def test_builds_and_predicts(path: Path):
    info = parse_name(path)
    cfg = shrink(load(path), info['kind'])
    model = build(cfg)
    backbone_cls = type(model.backbone).__name__
    assert backbone_cls == cfg.model.backbone.type
    assert [len(stage.blocks) for stage in model.backbone.stages] == list(SHRUNK_DEPTHS[info['kind']])
    model.init_weights()
    model.eval()
    data = _inputs(model, cfg.default_scope)
    with torch.no_grad():
        feats = model.backbone(data['inputs'])
        results = model(**data, mode='predict')

    expected_channels = [CHANNELS[info['variant']][i] for i in cfg.model.backbone.out_indices]
    assert [f.shape[1] for f in feats] == expected_channels
    assert len(results) == 1
    if cfg.default_scope == 'mmdet':
        pred = results[0].pred_instances
        assert pred.bboxes.ndim == 2
        assert pred.bboxes.shape[1] == 4
        assert len(pred.scores) == len(pred.labels) == len(pred.bboxes)
        if info['model'] in ('mask-rcnn', 'cascade-mask-rcnn'):
            assert pred.masks.shape[1:] == (64, 96)
    else:
        seg = results[0].pred_sem_seg.data
        assert seg.shape == (1, 64, 96)
        assert int(seg.min()) >= 0
        assert int(seg.max()) < 150


def _decay_of(cfg: Config, model: torch.nn.Module) -> dict[str, float]:
    """Weight decay each backbone parameter gets from the config's optimizer wrapper."""
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    decay = {}
    names = {id(p): n for n, p in model.named_parameters()}
    for group in wrapper.optimizer.param_groups:
        for p in group['params']:
            decay[names[id(p)]] = group['weight_decay']
    return {n[len('backbone.'):]: d for n, d in decay.items() if n.startswith('backbone.')}


@pytest.mark.parametrize('path', FAMILY_CASES, ids=[p.stem for p in FAMILY_CASES])
def test_no_weight_decay_on_norms_and_position_parameters(path: Path):
    info = parse_name(path)
    cfg = shrink(load(path), info['kind'])
    decay = _decay_of(cfg, build(cfg))
    exempt_pattern = re.compile(r'norm|pos_embed|relative_position_bias_table')
    exempt = {n: d for n, d in decay.items() if exempt_pattern.search(n)}
    decayed = {n: d for n, d in decay.items() if not exempt_pattern.search(n)}
    # the shrunk backbone still has every kind of exempt parameter
    kinds = {'out_norms', 'norm1', 'norm2'} | {'pvt': {'pos_embed'}, 'swin': {'relative_position_bias_table'},
                                                'cswin': set()}[info['kind']]
    assert all(any(k in n for n in exempt) for k in kinds), sorted(exempt)
    assert set(exempt.values()) == {0.0}
    wd = cfg.optim_wrapper.optimizer.weight_decay
    assert decayed
    assert all(d == pytest.approx(wd) for d in decayed.values())


# One config per backbone variant, for the checkpoint tests.
VARIANT_CASES = sorted({parse_name(p)['variant']: p for p in CONFIGS}.values())


def _offline(*args, **kwargs):
    raise urllib.error.URLError('no network in the config tests')


@pytest.mark.parametrize('path', VARIANT_CASES, ids=[p.stem for p in VARIANT_CASES])
def test_missing_checkpoint_names_the_path(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """inline://<variant> with no local file, an empty cache and no network: the error names
    checkpoints/<variant>.pth and how to point the backbone's init_cfg elsewhere (the tools add the
    --cfg-options spelling)."""
    info = parse_name(path)
    kind, size = info['variant']
    variant = f'inline_{kind}_{size}'
    if (CONFIG_ROOT.parent / 'checkpoints' / f'{variant}.pth').is_file():
        pytest.skip(f'checkpoints/{variant}.pth exists in this checkout')
    monkeypatch.chdir(tmp_path)  # no checkpoints/ here
    monkeypatch.setenv('INLINE_DENSE_CACHE', str(tmp_path / 'cache'))  # an empty cache
    monkeypatch.setattr(urllib.request, 'urlopen', _offline)  # and no downloads
    cfg = shrink(load(path), info['kind'], keep_init=True)
    model = build(cfg)
    with pytest.raises((FileNotFoundError, RuntimeError)) as err:
        model.init_weights()
    message = str(err.value)
    assert f'checkpoints/{variant}.pth' in message
    assert "backbone's init_cfg.checkpoint" in message  # it says how to point elsewhere


def _parse_cfg_options(argv: list[str]) -> dict:
    """The ``--cfg-options`` handling of mmdet's / mmseg's / our train.py."""
    parser = argparse.ArgumentParser()
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    return parser.parse_args(argv).cfg_options


@pytest.mark.slow
@pytest.mark.parametrize('path', VARIANT_CASES, ids=[p.stem for p in VARIANT_CASES])
def test_checkpoint_override_from_command_line_loads_it(path: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    info = parse_name(path)
    source = build(shrink(load(path), info['kind']), part='backbone')  # the weights' source: no heads needed
    source.init_weights()
    source = source.state_dict()
    weights = {k: v + 0.5 for k, v in source.items()}  # differs from any fresh init
    ckpt = tmp_path / 'elsewhere' / 'my_backbone.pth'
    ckpt.parent.mkdir()
    torch.save({'state_dict': weights}, ckpt)

    # the config's own short name: checkpoints/<variant>.pth in the working directory
    kind, size = info['variant']
    local = tmp_path / 'checkpoints' / f'inline_{kind}_{size}.pth'
    local.parent.mkdir()
    torch.save({'state_dict': {k: v + 0.25 for k, v in source.items()}}, local)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv('INLINE_DENSE_CACHE', str(tmp_path / 'cache'))
    monkeypatch.setattr(urllib.request, 'urlopen', _offline)
    model = build(shrink(load(path), info['kind'], keep_init=True))
    model.init_weights()
    loaded = model.backbone.state_dict()
    assert all(torch.equal(loaded[k], source[k] + 0.25) for k in loaded)

    cfg = shrink(load(path), info['kind'], keep_init=True)
    cfg.merge_from_dict(_parse_cfg_options(['--cfg-options', f'model.backbone.init_cfg.checkpoint={ckpt}']))
    assert cfg.model.backbone.init_cfg == dict(type='Pretrained', checkpoint=str(ckpt))
    backbone = build(cfg, part='backbone')  # the whole model's way to its backbone's file: checked above
    backbone.init_weights()
    loaded = backbone.state_dict()
    assert loaded.keys() == weights.keys()
    assert all(torch.equal(loaded[k], weights[k]) for k in weights)

    missing = tmp_path / 'nowhere' / 'inline.pth'
    cfg.merge_from_dict(_parse_cfg_options(['--cfg-options', f'model.backbone.init_cfg.checkpoint={missing}']))
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        build(cfg, part='backbone').init_weights()


def test_training_from_scratch_from_command_line():
    path = CONFIG_ROOT / 'mask_rcnn' / 'mask-rcnn_inline-swin-t_fpn_1x_coco.py'
    cfg = shrink(load(path), 'swin', keep_init=True)
    cfg.merge_from_dict(_parse_cfg_options(['--cfg-options', 'model.backbone.init_cfg=None']))
    assert cfg.model.backbone.init_cfg is None
    build(cfg).init_weights()  # no file needed
