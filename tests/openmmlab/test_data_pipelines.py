"""The installed stack works together with the numpy / OpenCV that torch 2.14 brings
(numpy 2.x): mmcv image I/O inside mmdet and mmseg pipelines, and COCO evaluation."""
import json

import cv2
import numpy as np
import pytest
import torch
from mmengine.registry import DefaultScope


@pytest.fixture
def image_file(tmp_path):
    """A (48, 64, 3) BGR image with a horizontal gradient plus noise, saved as PNG."""
    rng = np.random.default_rng(0)
    img = (np.linspace(0, 200, 64)[None, :, None] + rng.integers(0, 50, (48, 64, 3))).astype(np.uint8)
    path = tmp_path / 'img.png'
    assert cv2.imwrite(str(path), img)
    return path, img


def test_mmdet_pipeline_reads_resizes_flips(image_file):
    from mmcv.transforms import Compose
    from mmdet.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    path, img = image_file
    with DefaultScope.overwrite_default_scope('mmdet'):
        pipeline = Compose([
            dict(type='LoadImageFromFile'),
            dict(type='LoadAnnotations', with_bbox=True),
            dict(type='Resize', scale=(32, 24), keep_ratio=True),  # (w, h): factor 0.5
            dict(type='RandomFlip', prob=1.0, direction='horizontal'),
            dict(type='PackDetInputs'),
        ])
    out = pipeline(dict(img_path=str(path), img_id=0,
                        instances=[dict(bbox=[8., 4., 40., 28.], bbox_label=3, ignore_flag=0)]))
    expected = cv2.resize(img, (32, 24), interpolation=cv2.INTER_LINEAR)[:, ::-1]
    torch.testing.assert_close(out['inputs'], torch.from_numpy(expected.transpose(2, 0, 1).copy()))
    gt = out['data_samples'].gt_instances
    # scaled by 0.5 -> [4, 2, 20, 14]; flipped in a width of 32 -> x1 = 32 - 20, x2 = 32 - 4
    torch.testing.assert_close(gt.bboxes.tensor, torch.tensor([[12., 2., 28., 14.]]))
    assert gt.labels.tolist() == [3]
    assert out['data_samples'].scale_factor == (0.5, 0.5)


def test_mmseg_pipeline_reads_label_maps(image_file, tmp_path):
    from mmcv.transforms import Compose
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=False)
    path, _ = image_file
    labels = np.zeros((48, 64), np.uint8)
    labels[:, 32:] = 2
    labels[:, :32] = 1
    seg_path = tmp_path / 'seg.png'
    assert cv2.imwrite(str(seg_path), labels)
    with DefaultScope.overwrite_default_scope('mmseg'):
        pipeline = Compose([
            dict(type='LoadImageFromFile'),
            dict(type='LoadAnnotations'),
            dict(type='Resize', scale=(32, 24), keep_ratio=True),
            dict(type='PackSegInputs'),
        ])
    out = pipeline(dict(img_path=str(path), seg_map_path=str(seg_path), reduce_zero_label=False,
                        seg_fields=[]))
    assert tuple(out['inputs'].shape) == (3, 24, 32)
    expected = torch.ones(1, 24, 32, dtype=torch.int64)
    expected[..., 16:] = 2
    torch.testing.assert_close(out['data_samples'].gt_sem_seg.data.long(), expected)


def test_coco_bbox_metric(tmp_path):
    from mmdet.evaluation import CocoMetric
    gt_boxes = [[10, 10, 20, 20], [50, 40, 30, 20]]  # COCO xywh
    ann = dict(
        images=[dict(id=1, width=100, height=80, file_name='a.png')],
        categories=[dict(id=1, name='thing')],
        annotations=[dict(id=i + 1, image_id=1, category_id=1, bbox=b, area=b[2] * b[3], iscrowd=0)
                     for i, b in enumerate(gt_boxes)])
    ann_file = tmp_path / 'ann.json'
    ann_file.write_text(json.dumps(ann))

    def evaluate(pred_xyxy):
        metric = CocoMetric(ann_file=str(ann_file), metric='bbox')
        metric.dataset_meta = dict(classes=('thing',))
        n = len(pred_xyxy)
        metric.process({}, [dict(img_id=1, ori_shape=(80, 100), pred_instances=dict(
            bboxes=torch.tensor(pred_xyxy, dtype=torch.float32).reshape(n, 4),
            scores=torch.linspace(0.9, 0.5, n), labels=torch.zeros(n, dtype=torch.long)))])
        return metric.evaluate(size=1)['coco/bbox_mAP']

    xyxy = [[x, y, x + w, y + h] for x, y, w, h in gt_boxes]
    assert evaluate(xyxy) == 1.0
    # One of two objects found: precision 1 up to recall 0.5, then nothing: COCO's
    # 101-point AP is 51 / 101 = 0.505 (rounded to 3 places) at every IoU threshold.
    assert evaluate(xyxy[:1]) == 0.505
