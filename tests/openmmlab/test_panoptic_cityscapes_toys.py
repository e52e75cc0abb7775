"""The toy COCO panoptic and toy Cityscapes data and their configs (configs/toy/*_toy-coco-panoptic.py,
*_toy-cityscapes.py).

Quick: each folder is in the real layout and what the real readers read (panopticapi's ``rgb2id``,
mmdet's CocoPanopticDataset + LoadPanopticAnnotations, mmseg's CityscapesDataset); the ground truth
scores a perfect PQ with mmdet's CocoPanopticMetric and a perfect mIoU with mmseg's IoUMetric (whose
mean leaves out the 13 classes the toy never shows); each config builds, takes a training step and
predicts on its data. Slow: the panoptic toy and the Cityscapes UperNet toy trained through
tools/train.py as configured and evaluated through tools/test.py (PQ >= 40, mIoU >= 50 on whole 2:1
images).
"""
import hashlib
import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from helpers import import_tool, load_config

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / 'configs' / 'toy'
PANOPTIC = TOY / 'mask2former_inline-swin-mini_toy-coco-panoptic.py'
CITYSCAPES = {'upernet': TOY / 'upernet_inline-swin-mini_toy-cityscapes.py',
              'mask2former': TOY / 'mask2former_inline-swin-mini_toy-cityscapes.py'}
SMALL = dict(num_train=3, num_val=2, image_size=64, object_size=(12, 28))
SMALL_CITY = dict(num_train=4, num_val=2, image_size=64, object_size=(12, 28))  # 64x128
pytestmark = [pytest.mark.usefixtures('one_thread'), pytest.mark.stack]  # one_thread: tiny tensors on shared cores

LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
SERIAL = [f'{loader}.{k}={v}' for loader in LOADERS for k, v in (('num_workers', 0), ('persistent_workers', False))]


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob('*')) if p.is_file()}


# ---------------------------------------------------------------- the folders
def test_toy_coco_panoptic_is_in_cocos_panoptic_layout(tmp_path):
    from panopticapi.utils import rgb2id

    from inline_dense.toy_data import TOY_PANOPTIC_STUFF, TOY_PANOPTIC_THINGS, make_toy_coco_panoptic
    root = Path(make_toy_coco_panoptic(str(tmp_path / 'pan'), **SMALL))
    for split, num in (('train', 3), ('val', 2)):
        data = json.loads((root / 'annotations' / f'panoptic_{split}2017.json').read_text())
        cats = {c['id']: c for c in data['categories']}
        assert [c['name'] for c in data['categories'] if c['isthing']] == list(TOY_PANOPTIC_THINGS)
        assert [c['name'] for c in data['categories'] if not c['isthing']] == list(TOY_PANOPTIC_STUFF)
        assert len(data['images']) == len(data['annotations']) == num
        images = {im['id']: im for im in data['images']}
        for ann in data['annotations']:
            image = images[ann['image_id']]
            assert (root / f'{split}2017' / image['file_name']).is_file()
            assert ann['file_name'] == image['file_name'].replace('.jpg', '.png')
            png = cv2.imread(str(root / 'annotations' / f'panoptic_{split}2017' / ann['file_name']))[:, :, ::-1]
            assert png.shape == (image['height'], image['width'], 3)
            ids = rgb2id(png)  # panopticapi's decoder: id = R + 256 G + 256^2 B
            segments = {s['id']: s for s in ann['segments_info']}
            assert set(np.unique(ids)) - {0} == set(segments)
            assert (ids == 0).any(), 'the outlines are VOID'
            for seg_id, seg in segments.items():
                ys, xs = np.nonzero(ids == seg_id)
                assert seg['area'] == len(xs)
                assert seg['bbox'] == [xs.min(), ys.min(), xs.max() - xs.min() + 1, ys.max() - ys.min() + 1]
                assert seg['iscrowd'] == 0
                assert seg['category_id'] in cats
            kinds = [cats[s['category_id']]['isthing'] for s in ann['segments_info']]
            assert kinds.count(0) == 2
            assert kinds.count(1) >= 1
        instances = json.loads((root / 'annotations' / f'instances_{split}2017.json').read_text())
        things = sum(cats[s['category_id']]['isthing'] for a in data['annotations'] for s in a['segments_info'])
        assert len(instances['annotations']) == things
        assert {c['id'] for c in instances['categories']} == {i for i, c in cats.items() if c['isthing']}
    again = Path(make_toy_coco_panoptic(str(tmp_path / 'again'), **SMALL))
    assert digests(again) == digests(root)  # deterministic


def test_toy_cityscapes_is_in_cityscapes_layout(tmp_path):
    from mmseg.datasets import CityscapesDataset

    from inline_dense.toy_data import CITYSCAPES_CLASSES, TOY_CITYSCAPES_PRESENT, make_toy_cityscapes
    assert CityscapesDataset.METAINFO['classes'] == CITYSCAPES_CLASSES
    root = Path(make_toy_cityscapes(str(tmp_path / 'cs'), **SMALL_CITY))
    present = {CITYSCAPES_CLASSES.index(c) for c in TOY_CITYSCAPES_PRESENT}
    seen: set[int] = set()
    for split, num in (('train', 4), ('val', 2)):
        images = sorted((root / 'leftImg8bit' / split).glob('*/*_leftImg8bit.png'))
        assert len(images) == num
        assert len({p.parent.name for p in images}) == 2  # two cities per split
        for image in images:
            city, seq, frame = image.name[:-len('_leftImg8bit.png')].split('_')
            assert image.parent.name == city
            assert len(seq) == len(frame) == 6
            label_path = root / 'gtFine' / split / city / f'{city}_{seq}_{frame}_gtFine_labelTrainIds.png'
            label = cv2.imread(str(label_path), cv2.IMREAD_UNCHANGED)
            assert label.dtype == np.uint8
            assert label.ndim == 2
            assert label.shape == cv2.imread(str(image)).shape[:2] == (64, 128)  # 2:1
            values = set(np.unique(label).tolist())
            assert values <= present | {255}
            assert 255 in values
            seen |= values
    assert present <= seen
    again = Path(make_toy_cityscapes(str(tmp_path / 'again'), **SMALL_CITY))
    assert digests(again) == digests(root)


def test_make_toy_data_writes_both_layouts(tmp_path, capsys):
    tool = import_tool('make_toy_data')
    tool.main(['cityscapes', '--root', str(tmp_path / 'cs'), '--num-train', '2', '--num-val', '1',
               '--image-size', '48'])
    tool.main(['coco-panoptic', '--root', str(tmp_path / 'pan'), '--num-train', '2', '--num-val', '1',
               '--image-size', '48'])
    out = capsys.readouterr().out
    assert '2 train / 1 val images, 48x96' in out
    assert '2 train / 1 val images, 48x48' in out
    assert len(list((tmp_path / 'cs' / 'gtFine' / 'train').glob('*/*_gtFine_labelTrainIds.png'))) == 2
    assert len(list((tmp_path / 'pan' / 'annotations' / 'panoptic_val2017').glob('*.png'))) == 1


# ---------------------------------------------------------------- the real readers and metrics
def dataset(config: Path, root: Path, toy_data: dict, loader: str = 'val_dataloader'):
    """The config's dataset (its type, files and pipeline) on a small toy folder at ``root``."""
    cfg = load_config(config)
    spec = cfg[loader].dataset
    spec.update(data_root=str(root) + '/', toy_data=toy_data)
    if cfg.default_scope == 'mmdet':
        from mmdet.registry import DATASETS
        from mmdet.utils import register_all_modules
    else:
        from mmseg.registry import DATASETS
        from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=True)
    import inline_dense.openmmlab.toy_datasets  # noqa: F401  (registers the toy datasets)
    return cfg, DATASETS.build(spec)


def test_panoptic_dataset_loads_things_and_stuff(tmp_path):
    _cfg, ds = dataset(PANOPTIC, tmp_path / 'pan', SMALL, 'train_dataloader')
    assert type(ds).__mro__[1].__name__ == 'ToyFolderMixin'
    assert 'CocoPanopticDataset' in [c.__name__ for c in type(ds).__mro__]
    assert ds.metainfo['thing_classes'] == ('circle', 'square', 'triangle')
    assert ds.metainfo['stuff_classes'] == ('sky', 'ground')
    assert len(ds) == 3
    sample = ds[0]['data_samples']
    seg = sample.gt_sem_seg.sem_seg.numpy()
    assert set(np.unique(seg).tolist()) <= {0, 1, 2, 3, 4, 255}
    assert {3, 4, 255} <= set(np.unique(seg).tolist())  # stuff after the things; VOID as 255
    things = [s for s in ds.get_data_info(0)['segments_info'] if s['is_thing']]
    assert len(sample.gt_instances) == len(things) >= 1
    assert sample.gt_instances.masks.masks.shape[1:] == seg.shape[1:]


def test_the_tools_dataset_check_counts_panoptic_segments(tmp_path):
    """tools/train.py and tools/test.py check the annotation files before running: a panoptic file's
    units are the segments of each image's segments_info (none degenerate here), not its images."""
    from inline_dense.openmmlab.engine.dataset_checks import annotation_counts, check_dataset_and_heads
    cfg, ds = dataset(PANOPTIC, tmp_path / 'pan', SMALL)
    path = tmp_path / 'pan' / 'annotations' / 'panoptic_val2017.json'
    segments = sum(len(a['segments_info']) for a in json.loads(path.read_text())['annotations'])
    assert annotation_counts(str(path), ds.metainfo['classes']) == dict(total=segments, degenerate=0, unknown=0)
    for loader in ('val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.data_root = str(tmp_path / 'pan') + '/'
    check_dataset_and_heads(cfg, ['val_dataloader', 'test_dataloader'])  # raises when it would drop them all


def test_cityscapes_dataset_reads_train_ids(tmp_path):
    cfg, ds = dataset(CITYSCAPES['upernet'], tmp_path / 'cs', SMALL_CITY)
    assert len(ds.metainfo['classes']) == 19
    assert len(ds) == 2
    assert ds.get_data_info(0)['seg_map_path'].endswith('_gtFine_labelTrainIds.png')
    sample = ds[0]['data_samples']
    assert sample.gt_sem_seg.data.shape[1:] == (64, 128)
    assert cfg.model.test_cfg.mode == 'whole'


def perfect_panoptic_prediction(png_path: Path, segments: list[dict], cat2label: dict, num_classes: int):
    """mmdet's panoptic output for the ground truth itself: label + instance * INSTANCE_OFFSET per
    segment, ``num_classes`` (VOID) elsewhere."""
    from mmdet.evaluation.functional import INSTANCE_OFFSET
    from panopticapi.utils import rgb2id
    ids = rgb2id(cv2.imread(str(png_path))[:, :, ::-1])
    pan = np.full(ids.shape, num_classes, np.int64)
    for k, seg in enumerate(segments):
        pan[ids == seg['id']] = cat2label[seg['category_id']] + (k + 1) * INSTANCE_OFFSET
    return pan


def test_the_ground_truth_scores_pq_100_with_mmdets_metric(tmp_path):
    from mmdet.evaluation import CocoPanopticMetric
    cfg, ds = dataset(PANOPTIC, tmp_path / 'pan', SMALL)
    spec = dict(cfg.test_evaluator[0])
    assert spec.pop('type') == 'CocoPanopticMetric'
    root = tmp_path / 'pan'
    metric = CocoPanopticMetric(**dict(spec, ann_file=str(root / 'annotations' / 'panoptic_val2017.json'),
                                       seg_prefix=str(root / 'annotations' / 'panoptic_val2017')))
    metric.dataset_meta = ds.metainfo
    gt = json.loads((root / 'annotations' / 'panoptic_val2017.json').read_text())
    cat2label = {c['id']: i for i, c in enumerate(gt['categories'])}
    images = {im['id']: im for im in gt['images']}
    for ann in gt['annotations']:
        png = root / 'annotations' / 'panoptic_val2017' / ann['file_name']
        pan = perfect_panoptic_prediction(png, ann['segments_info'], cat2label, len(cat2label))
        image = images[ann['image_id']]
        prediction = dict(sem_seg=torch.from_numpy(pan[None]))  # a DetDataSample's to_dict(), as the evaluator's
        metric.process({}, [dict(img_id=ann['image_id'], img_path=str(root / 'val2017' / image['file_name']),
                                 ori_shape=pan.shape, pred_panoptic_seg=prediction)])
    result = metric.evaluate(len(gt['annotations']))
    for key in ('PQ', 'SQ', 'RQ', 'PQ_th', 'SQ_th', 'RQ_th', 'PQ_st', 'SQ_st', 'RQ_st'):
        assert result[f'coco_panoptic/{key}'] == pytest.approx(100.0), key


def test_iou_metric_leaves_the_absent_classes_out_of_the_mean(tmp_path):
    """The ground truth as the prediction: IoU 100 for the six classes that occur, NaN (0 / 0) for
    the 13 that never do, and mIoU 100, not 6/19 of it."""
    from mmseg.evaluation import IoUMetric
    _, ds = dataset(CITYSCAPES['upernet'], tmp_path / 'cs', SMALL_CITY)
    metric = IoUMetric(iou_metrics=['mIoU'])
    metric.dataset_meta = ds.metainfo
    for i in range(len(ds)):
        gt = ds[i]['data_samples'].gt_sem_seg.data
        metric.process({}, [dict(pred_sem_seg=dict(data=gt), gt_sem_seg=dict(data=gt))])  # SegDataSample.to_dict()
    unions = sum(r[1] for r in metric.results)  # (intersection, union, predicted, label) areas per class
    assert int((unions > 0).sum()) == 6
    assert metric.compute_metrics(metric.results)['mIoU'] == pytest.approx(100.0)


@pytest.mark.parametrize('config', [PANOPTIC, *CITYSCAPES.values()], ids=lambda p: p.stem)
def test_toy_config_trains_a_step_and_predicts(config, tmp_path):
    small = SMALL_CITY if 'cityscapes' in config.stem else SMALL
    cfg, train_set = dataset(config, tmp_path / 'data', small, 'train_dataloader')
    _, val_set = dataset(config, tmp_path / 'data', small)
    from mmengine.dataset import pseudo_collate
    from mmengine.optim import OptimWrapper
    if cfg.default_scope == 'mmdet':
        from mmdet.registry import MODELS
    else:
        from mmseg.registry import MODELS
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    optim = OptimWrapper(torch.optim.AdamW(model.parameters(), lr=1e-4))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses = model.train_step(pseudo_collate([train_set[0], train_set[1]]), optim)
    assert all(math.isfinite(float(v)) for v in losses.values())
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    model.eval()
    with torch.no_grad():
        (out,) = model.test_step(pseudo_collate([val_set[0]]))
    if cfg.default_scope == 'mmdet':
        pan = out.pred_panoptic_seg.sem_seg
        assert pan.shape[-2:] == (64, 64)
        assert len(out.pred_instances) <= cfg.model.test_cfg.max_per_image
    else:
        assert out.pred_sem_seg.data.shape[-2:] == (64, 128)  # the whole 2:1 image
        assert out.seg_logits.data.shape[0] == 19


# ---------------------------------------------------------------- end to end
def log_of(work_dir: Path) -> str:
    return next(work_dir.glob('*/*.log')).read_text()


@pytest.mark.slow
def test_the_panoptic_toy_reaches_pq_40(tmp_path, monkeypatch):
    """python tools/train.py configs/toy/mask2former_inline-swin-mini_toy-coco-panoptic.py as configured
    (the toy data generated on first use), then tools/test.py: PQ >= 40 (a random predictor scores
    about 0), with PQ, SQ and RQ of things and stuff in the log."""
    monkeypatch.chdir(tmp_path)
    train, test = import_tool('train'), import_tool('test')
    cfg = load_config(PANOPTIC)
    options = ['randomness.seed=0', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
               'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False']
    train.main([str(PANOPTIC), '--work-dir', str(tmp_path / 'work'), '--cfg-options', *options])
    checkpoint = tmp_path / 'work' / f'iter_{cfg.train_cfg.max_iters}.pth'
    assert checkpoint.is_file()
    metrics = test.main([str(PANOPTIC), str(checkpoint), '--work-dir', str(tmp_path / 'test'),
                         '--cfg-options', *SERIAL])
    assert metrics['coco_panoptic/PQ'] >= 40, metrics
    log = log_of(tmp_path / 'test')
    for row in ('| All ', '| Things ', '| Stuff '):
        assert row in log, f'{row.strip()} missing from the PQ / SQ / RQ table'
    for key in ('PQ_th', 'SQ_th', 'RQ_th', 'PQ_st', 'SQ_st', 'RQ_st'):
        assert f'coco_panoptic/{key}' in metrics
    assert math.isfinite(metrics['coco/segm_mAP'])  # the recipe's instance metric on the same run


@pytest.mark.slow
def test_the_cityscapes_toy_reaches_miou_50_on_whole_images(tmp_path, monkeypatch):
    """python tools/train.py configs/toy/upernet_inline-swin-mini_toy-cityscapes.py as configured (64x128
    crops), then tools/test.py in whole mode on the 128x256 images: mIoU >= 50."""
    monkeypatch.chdir(tmp_path)
    train, test = import_tool('train'), import_tool('test')
    config = CITYSCAPES['upernet']
    cfg = load_config(config)
    assert cfg.model.test_cfg.mode == 'whole'
    options = ['randomness.seed=0', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
               'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False']
    train.main([str(config), '--work-dir', str(tmp_path / 'work'), '--cfg-options', *options])
    checkpoint = tmp_path / 'work' / f'iter_{cfg.train_cfg.max_iters}.pth'
    metrics = test.main([str(config), str(checkpoint), '--work-dir', str(tmp_path / 'test'),
                         '--cfg-options', *SERIAL])
    images = list((tmp_path / 'data' / 'toy_cityscapes' / 'leftImg8bit' / 'val').glob('*/*.png'))
    assert {cv2.imread(str(p)).shape[:2] for p in images} == {(128, 256)}
    assert metrics['mIoU'] >= 50, metrics
