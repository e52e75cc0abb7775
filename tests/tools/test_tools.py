"""tools/train.py, tools/test.py and the toy data: fast checks, no training (see test_toy_e2e.py)."""
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import import_tool
from inline_dense.openmmlab.engine import launch
from inline_dense.toy_data import TOY_ADE_CLASSES, TOY_COCO_CLASSES, make_toy_ade, make_toy_coco, read_stamp

ROOT = Path(__file__).resolve().parents[2]

TOY = ROOT / 'configs' / 'toy'
TOY_CONFIGS = {
    'mask-rcnn_inline-swin-mini_fpn_toy-coco.py': ('mmdet', 'MaskRCNN', 'InLineSwin'),
    'retinanet_inline-pvt-mini_fpn_toy-coco.py': ('mmdet', 'RetinaNet', 'InLinePVT'),
    'upernet_inline-swin-mini_toy-ade.py': ('mmseg', 'EncoderDecoder', 'InLineSwin'),
    'fpn_inline-pvt-mini_toy-ade.py': ('mmseg', 'EncoderDecoder', 'InLinePVT'),
    'cascade-mask-rcnn_inline-cswin-mini_fpn_toy-coco.py': ('mmdet', 'CascadeRCNN', 'InLineCSwin'),
}


train_tool = import_tool('train')
test_tool = import_tool('test')
SMALL = dict(num_train=3, num_val=2, image_size=64, object_size=(12, 28))


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- toy data
def test_toy_coco_layout_and_annotations(tmp_path):
    root = Path(make_toy_coco(str(tmp_path / 'coco'), **SMALL))
    for split, num in (('train', 3), ('val', 2)):
        ann = json.loads((root / 'annotations' / f'instances_{split}2017.json').read_text())
        assert [c['name'] for c in ann['categories']] == list(TOY_COCO_CLASSES)
        assert len(ann['images']) == num
        for img in ann['images']:
            assert (root / f'{split}2017' / img['file_name']).is_file()
            assert (img['height'], img['width']) == (64, 64)
        assert ann['annotations'], 'every image has at least one object'
        for a in ann['annotations']:
            x, y, w, h = a['bbox']
            poly = np.asarray(a['segmentation'][0]).reshape(-1, 2)
            assert a['iscrowd'] == 0
            assert len(poly) >= 3
            assert x >= 0
            assert y >= 0
            assert x + w <= 64
            assert y + h <= 64
            # the box is the polygon's extent and the area lies inside the box
            assert np.allclose([poly[:, 0].min(), poly[:, 1].min()], [x, y], atol=0.02)
            assert 0 < a['area'] <= w * h + 1e-6
    ids = [i['id'] for s in ('train', 'val')
           for i in json.loads((root / 'annotations' / f'instances_{s}2017.json').read_text())['images']]
    assert len(set(ids)) == len(ids), 'image ids are unique across splits'


def test_toy_coco_is_deterministic_and_seeded(tmp_path):
    a = Path(make_toy_coco(str(tmp_path / 'a'), **SMALL))
    b = Path(make_toy_coco(str(tmp_path / 'b'), **SMALL))
    c = Path(make_toy_coco(str(tmp_path / 'c'), **dict(SMALL, seed=1)))
    ann = 'annotations/instances_train2017.json'
    img = 'train2017/000000000001.jpg'
    assert file_digest(a / ann) == file_digest(b / ann)
    assert file_digest(a / img) == file_digest(b / img)
    assert file_digest(a / ann) != file_digest(c / ann)


def test_toy_ade_layout_and_labels(tmp_path):
    root = Path(make_toy_ade(str(tmp_path / 'ade'), **dict(SMALL, num_train=6)))
    import cv2
    seen = set()
    for split, short, num in (('training', 'train', 6), ('validation', 'val', 2)):
        images = sorted((root / 'images' / split).glob('*.jpg'))
        labels = sorted((root / 'annotations' / split).glob('*.png'))
        assert [p.stem for p in images] == [p.stem for p in labels] == [f'ADE_{short}_{k:08d}' for k in
                                                                        range(1, num + 1)]
        for p in labels:
            label = cv2.imread(str(p), cv2.IMREAD_UNCHANGED)
            assert label.shape == (64, 64)
            assert label.dtype == np.uint8
            seen |= set(np.unique(label).tolist())
    # 0 = unlabelled (object outlines), 1..K the classes, as ADE20K
    assert seen <= set(range(len(TOY_ADE_CLASSES) + 1))
    assert {0, 1, 2} <= seen
    assert len(seen & {3, 4, 5}) >= 2


def test_toy_folder_is_kept_forced_or_refused(tmp_path):
    root = Path(make_toy_coco(str(tmp_path / 'coco'), **SMALL))
    marker = root / 'marker.txt'
    marker.write_text('x')
    make_toy_coco(str(root), **SMALL)
    assert marker.exists(), 'an existing toy folder is reused, not regenerated'
    make_toy_coco(str(root), force=True, **dict(SMALL, num_train=4))
    assert not marker.exists()
    assert read_stamp(str(root))['num_train'] == 4
    other = tmp_path / 'real_coco'
    other.mkdir()
    with pytest.raises(FileExistsError, match='not made by the toy data generator'):
        make_toy_coco(str(other), **SMALL)
    make_toy_ade(str(tmp_path / 'ade'), **SMALL)
    with pytest.raises(FileExistsError, match="holds toy data of kind 'ade', not 'coco'"):
        make_toy_coco(str(tmp_path / 'ade'), **SMALL)
    with pytest.raises(ValueError, match='object_size'):
        make_toy_coco(str(tmp_path / 'bad'), image_size=32, object_size=(10, 40))


def test_make_toy_data_tool(tmp_path, capsys):
    make_toy_data = import_tool('make_toy_data')
    make_toy_data.main(['ade', '--root', str(tmp_path / 'ade'), '--num-train', '2', '--num-val', '1',
                        '--image-size', '48'])
    out = capsys.readouterr().out
    assert 'toy ade' in out
    assert '2 train / 1 val images, 48x48' in out
    assert len(list((tmp_path / 'ade' / 'images' / 'training').glob('*.jpg'))) == 2
    with pytest.raises(SystemExit):
        make_toy_data.main(['--root', str(tmp_path / 'x')])  # --root needs one dataset


def test_toy_datasets_generate_on_first_use(tmp_path):
    from mmdet.registry import DATASETS as DET
    from mmseg.registry import DATASETS as SEG

    from inline_dense.openmmlab import toy_datasets  # noqa: F401  (registers them)

    coco_root = tmp_path / 'toy_coco'
    det = DET.build(dict(type='mmdet.ToyCocoDataset', data_root=str(coco_root), toy_data=SMALL,
                         ann_file='annotations/instances_val2017.json', data_prefix=dict(img='val2017/'),
                         pipeline=[]))
    assert read_stamp(str(coco_root))['kind'] == 'coco'
    assert len(det) == 2
    assert det.metainfo['classes'] == TOY_COCO_CLASSES
    assert {inst['bbox_label'] for i in range(len(det)) for inst in det.get_data_info(i)['instances']} <= {0, 1, 2}

    seg = SEG.build(dict(type='mmseg.ToyADE20KDataset', data_root=str(tmp_path / 'toy_ade'), toy_data=SMALL,
                         data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
                         pipeline=[dict(type='mmseg.LoadAnnotations', reduce_zero_label=True)]))
    assert len(seg) == 2
    assert seg.metainfo['classes'] == TOY_ADE_CLASSES
    labels = np.unique(seg[0]['gt_seg_map'])
    assert set(labels.tolist()) <= set(range(len(TOY_ADE_CLASSES))) | {255}
    assert 255 in labels, 'ADE20K convention: 0 (unlabelled) becomes the ignore index'


# ---------------------------------------------------------------- configs and codebase detection
@pytest.mark.parametrize('name', sorted(TOY_CONFIGS))
def test_toy_config_codebase_and_model(name):
    codebase, detector, backbone = TOY_CONFIGS[name]
    cfg = launch.load_config(str(TOY / name))
    assert launch.detect_codebase(cfg) == codebase
    assert cfg.model.type == detector
    assert cfg.model.backbone.type == backbone
    assert cfg.model.backbone.init_cfg is None
    assert 'inline_dense.openmmlab' in cfg.custom_imports.imports
    assert not cfg.custom_imports.allow_failed_imports
    metric = cfg.test_evaluator.type
    assert metric == ('CocoMetric' if codebase == 'mmdet' else 'IoUMetric')


def test_codebase_from_model_type_and_unknown():
    from mmengine.config import Config
    cfg = Config(dict(model=dict(type='EncoderDecoder')))
    assert launch.detect_codebase(cfg) == 'mmseg'
    cfg = Config(dict(model=dict(type='MaskRCNN')))
    assert launch.detect_codebase(cfg) == 'mmdet'
    with pytest.raises(ValueError, match='default_scope'):
        launch.detect_codebase(Config(dict(model=dict(type='NoSuchModel'))))


def test_missing_config_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        launch.load_config(str(tmp_path / 'nope.py'))


# ---------------------------------------------------------------- options
def test_train_options(monkeypatch):
    monkeypatch.delenv('LOCAL_RANK', raising=False)
    args = train_tool.parse_args(['c.py', '--resume', '--local-rank', '3'])
    assert args.resume == 'auto'
    assert os.environ['LOCAL_RANK'] == '3'
    args = train_tool.parse_args(['c.py', '--resume', 'w/iter_4.pth', '--amp', '--cfg-options', 'a.b=1'])
    assert args.resume == 'w/iter_4.pth'
    assert args.amp
    assert args.cfg_options == {'a.b': 1}
    assert train_tool.parse_args(['c.py']).resume is None


def test_resume_from_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match='no such checkpoint'):
        train_tool.main([str(TOY / 'fpn_inline-pvt-mini_toy-ade.py'), '--work-dir', str(tmp_path),
                         '--resume', str(tmp_path / 'missing.pth')])


def test_test_options(tmp_path):
    with pytest.raises(SystemExit):
        test_tool.parse_args(['c.py', 'x.pth', '--out', 'preds.json'])
    assert test_tool.parse_args(['c.py', 'x.pth', '--out', 'p.pkl']).out == 'p.pkl'
    with pytest.raises(FileNotFoundError, match='checkpoint'):
        test_tool.main([str(TOY / 'fpn_inline-pvt-mini_toy-ade.py'), str(tmp_path / 'none.pth'),
                        '--work-dir', str(tmp_path)])


def _optim_cfg(**wrapper):
    from mmengine.config import Config
    return Config(dict(optim_wrapper=dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-3), **wrapper)))


@pytest.mark.parametrize(('device', 'user_dtype', 'want_type', 'want_dtype', 'want_scale'), [
    ('cpu', None, 'CpuAmpOptimWrapper', 'bfloat16', None),
    ('cuda', None, 'AmpOptimWrapper', 'float16', 'dynamic'),
    ('cuda', 'bfloat16', 'AmpOptimWrapper', 'bfloat16', None),
])
def test_amp_settings(monkeypatch, device, user_dtype, want_type, want_dtype, want_scale):
    import mmengine.device

    from inline_dense.runtime import precision
    monkeypatch.setattr(mmengine.device, 'get_device', lambda: device)
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)
    cfg = _optim_cfg(**({'dtype': user_dtype} if user_dtype else {}))
    train_tool.enable_amp(cfg)
    assert cfg.optim_wrapper.type == want_type
    assert cfg.optim_wrapper.dtype == want_dtype
    assert cfg.optim_wrapper.get('loss_scale') == want_scale


@pytest.mark.parametrize('native', [True, False])
def test_amp_on_a_cpu_without_native_bf16_says_so_and_trains_float32(monkeypatch, capsys, native):
    import mmengine.device

    from inline_dense.runtime import precision
    monkeypatch.setattr(mmengine.device, 'get_device', lambda: 'cpu')
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: native)
    cfg = _optim_cfg()
    train_tool.enable_amp(cfg)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith('[amp]')]
    if native:
        assert cfg.optim_wrapper.type == 'CpuAmpOptimWrapper'
        assert not lines
    else:
        assert cfg.optim_wrapper.type == 'OptimWrapper'
        assert 'dtype' not in cfg.optim_wrapper
        assert len(lines) == 1
        assert 'runs float32' in lines[0]


def test_amp_float16_on_cpu_is_refused(monkeypatch):
    import mmengine.device
    monkeypatch.setattr(mmengine.device, 'get_device', lambda: 'cpu')
    with pytest.raises(ValueError, match='float16 autocast on CPU'):
        train_tool.enable_amp(_optim_cfg(dtype='float16'))


def test_amp_on_cpu_refuses_two_stage_detectors_with_compiled_mmcv(monkeypatch):
    """Compiled mmcv's CPU NMS / RoIAlign have no bfloat16 kernels: refused up front, saying what to
    do. mmcv-lite's stand-in runs them in float32, so there Mask R-CNN trains with --amp (the toy
    runs in test_amp)."""
    import mmengine.device

    from inline_dense.runtime import precision
    monkeypatch.setattr(mmengine.device, 'get_device', lambda: 'cpu')
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)
    monkeypatch.setattr(train_tool, 'uses_stand_in', lambda: False)
    cfg = launch.load_config(str(TOY / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py'))
    with pytest.raises(ValueError, match=r'no bfloat16 version.*train this model without --amp'):
        train_tool.enable_amp(cfg)
    monkeypatch.setattr(train_tool, 'uses_stand_in', lambda: True)
    train_tool.enable_amp(cfg)
    assert cfg.optim_wrapper.type == 'CpuAmpOptimWrapper'
    assert cfg.optim_wrapper.dtype == 'bfloat16'
    cfg = launch.load_config(str(TOY / 'retinanet_inline-pvt-mini_fpn_toy-coco.py'))
    train_tool.enable_amp(cfg)
    assert cfg.optim_wrapper.type == 'CpuAmpOptimWrapper'


def test_cpu_amp_wrapper_autocasts_to_bfloat16():
    import torch
    from mmengine.optim import build_optim_wrapper
    model = torch.nn.Linear(4, 2)
    wrapper = build_optim_wrapper(model, dict(type='CpuAmpOptimWrapper', dtype='bfloat16',
                                              optimizer=dict(type='SGD', lr=0.1)))
    with wrapper.optim_context(model):
        out = model(torch.randn(3, 4))
    assert out.dtype == torch.bfloat16
    before = model.weight.detach().clone()
    wrapper.update_params(out.float().pow(2).mean())
    assert not torch.equal(before, model.weight)


def test_cpu_distributed_settings(monkeypatch):
    import torch
    from mmengine.config import Config
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: False)
    started = []
    monkeypatch.setattr(launch, 'init_cpu_process_group', started.append)
    model = dict(type='EncoderDecoder', decode_head=dict(norm_cfg=dict(type='SyncBN')),
                 auxiliary_head=[dict(norm_cfg=dict(type='SyncBN', requires_grad=True))])
    cfg = Config(dict(launcher='pytorch', model=model, env_cfg=dict(dist_cfg=dict(backend='nccl'))))
    with pytest.warns(UserWarning, match='SyncBN'):
        launch.adapt_to_cpu(cfg)
    assert cfg.env_cfg.dist_cfg.backend == 'gloo'
    assert cfg.model_wrapper_cfg.device_ids is None
    assert cfg.model.decode_head.norm_cfg.type == 'BN'
    assert cfg.model.auxiliary_head[0].norm_cfg.type == 'BN'
    assert started == [cfg.env_cfg.dist_cfg], 'the gloo process group is started before the Runner'
    single = Config(dict(launcher='none', model=model, env_cfg=dict(dist_cfg=dict(backend='nccl'))))
    launch.adapt_to_cpu(single)
    assert single.env_cfg.dist_cfg.backend == 'nccl'
    assert 'model_wrapper_cfg' not in single
    with pytest.raises(ValueError, match='torchrun'):
        launch.adapt_to_cpu(Config(dict(launcher='slurm', model=model)))


def test_cpu_process_group_needs_torchrun_env(monkeypatch):
    for key in ('RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT'):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(RuntimeError, match=r'dist_train.sh'):
        launch.init_cpu_process_group({'backend': 'gloo'})


def test_dist_scripts_usage():
    import subprocess
    for script in ('dist_train.sh', 'dist_test.sh'):
        res = subprocess.run(['bash', str(ROOT / 'tools' / script)], capture_output=True, text=True)
        assert res.returncode == 2
        assert 'usage' in res.stderr
