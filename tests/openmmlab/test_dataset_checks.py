"""tools/train.py and tools/test.py check the datasets against the model before a run:
a head's class count against the dataset's (refused), degenerate boxes and unknown category ids
(counted and warned; refused when a file's annotations would all be dropped)."""
import json
import shutil
import warnings
from pathlib import Path

import pytest
from mmengine.config import Config

from inline_dense.openmmlab.engine.dataset_checks import DatasetCheckError, annotation_counts, check_dataset_and_heads
from inline_dense.openmmlab.engine.launch import setup_codebase

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / 'configs' / 'toy'
RETINANET_TOY = str(TOY / 'retinanet_inline-pvt-mini_fpn_toy-coco.py')
MASK_RCNN_TOY = str(TOY / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
CASCADE_TOY = str(TOY / 'cascade-mask-rcnn_inline-cswin-mini_fpn_toy-coco.py')
FPN_TOY = str(TOY / 'fpn_inline-pvt-mini_toy-ade.py')
M2F_COCO_TOY = str(TOY / 'mask2former_inline-swin-mini_toy-coco.py')
M2F_ADE_TOY = str(TOY / 'mask2former_inline-swin-mini_toy-ade.py')
CLASSES = ('circle', 'square', 'triangle')


@pytest.mark.parametrize(('config', 'option', 'number'), [
    (RETINANET_TOY, 'model.bbox_head.num_classes', 2),
    (RETINANET_TOY, 'model.bbox_head.num_classes', 4),
    (MASK_RCNN_TOY, 'model.roi_head.mask_head.num_classes', 2),
    (CASCADE_TOY, 'model.roi_head.bbox_head.1.num_classes', 1),
])
def test_a_head_that_does_not_fit_the_datasets_classes_is_refused(config, option, number, toy_dir, tmp_path,
                                                                 monkeypatch, load_tool):
    monkeypatch.chdir(toy_dir)
    if '.1.' in option:  # a cascade stage, an item of a list: edit the config itself
        cfg = Config.fromfile(config)
        cfg.model.roi_head.bbox_head[1].num_classes = number
        config = str(tmp_path / 'cascade.py')
        cfg.dump(config)
        options = []
    else:
        options = ['--cfg-options', f'{option}={number}']
    with pytest.raises(DatasetCheckError) as info:
        load_tool('train').main([config, '--work-dir', str(tmp_path / 'w'), *options])
    message = str(info.value)
    assert f'{option} is {number}' in message
    assert 'but train_dataloader.dataset has 3 classes (circle, square, triangle)' in message
    assert ('trained as background' if number < 3 else 'never be trained') in message
    assert f'{option}=3' in message


def _m2f_config(path, **edits):
    cfg = Config.fromfile(path)
    setup_codebase(cfg)
    for where, values in edits.items():
        head = cfg.model[where]
        for name, value in values.items():
            head[name] = value
    return cfg


@pytest.mark.parametrize(('head', 'things'), [('panoptic_head', 2), ('panoptic_head', 5), ('panoptic_fusion_head', 4)])
def test_mask2former_thing_counts_that_do_not_fit_the_dataset_are_refused(head, things):
    num = things
    weights = [1.0] * num + [0.1]
    edit = {head: dict(num_things_classes=things)}
    if head == 'panoptic_head':
        edit[head]['loss_cls'] = dict(type='mmdet.CrossEntropyLoss', use_sigmoid=False, class_weight=weights)
    cfg = _m2f_config(M2F_COCO_TOY, **edit)
    with pytest.raises(DatasetCheckError) as info:
        check_dataset_and_heads(cfg, ('train_dataloader', 'val_dataloader'))
    message = str(info.value)
    assert f'model.{head}.num_things_classes is {things}' in message
    assert 'train_dataloader.dataset has 3 classes (circle, square, triangle; 3 thing and 0 stuff classes)' in message
    assert f'--cfg-options model.{head}.num_things_classes=3' in message


def test_mask2former_stuff_classes_on_an_instance_dataset_are_refused():
    cfg = _m2f_config(M2F_COCO_TOY, panoptic_head=dict(num_things_classes=2, num_stuff_classes=1, loss_cls=dict(
        type='mmdet.CrossEntropyLoss', use_sigmoid=False, class_weight=[1.0] * 3 + [0.1])))
    with pytest.raises(DatasetCheckError, match=r'num_stuff_classes is 1.*0 stuff classes.*num_stuff_classes=0'):
        check_dataset_and_heads(cfg, ('train_dataloader',))


@pytest.mark.parametrize(('config', 'head', 'named'), [
    (M2F_COCO_TOY, 'panoptic_head', '3 + 0 classes (num_things_classes + num_stuff_classes)'),
    (M2F_ADE_TOY, 'decode_head', '5 classes (num_classes)'),
])
def test_a_class_weight_of_the_wrong_length_is_refused(config, head, named):
    cfg = _m2f_config(config)
    cfg.model[head].loss_cls.class_weight = cfg.model[head].loss_cls.class_weight[:-2]
    length = len(cfg.model[head].loss_cls.class_weight)
    with pytest.raises(DatasetCheckError) as info:
        check_dataset_and_heads(cfg, ('train_dataloader',))
    assert str(info.value).startswith(f'model.{head}.loss_cls.class_weight has {length} entries, but the head has '
                                      f'{named}: it needs {length + 2}')


@pytest.mark.parametrize('config', [M2F_COCO_TOY, M2F_ADE_TOY])
def test_the_mask2former_toys_pass(config, toy_dir, monkeypatch):
    monkeypatch.chdir(toy_dir)
    check_dataset_and_heads(_m2f_config(config), ('train_dataloader', 'val_dataloader'))


def test_mmseg_mask2former_num_classes_is_checked():
    cfg = _m2f_config(M2F_ADE_TOY, decode_head=dict(num_classes=4))
    cfg.model.decode_head.loss_cls.class_weight = [1.0] * 4 + [0.1]
    with pytest.raises(DatasetCheckError, match=r'model.decode_head.num_classes is 4, but train_dataloader.dataset '
                                                r'has 5 classes'):
        check_dataset_and_heads(cfg, ('train_dataloader',))


def test_the_test_tool_checks_the_segmentation_head(toy_dir, tmp_path, monkeypatch, load_tool):
    monkeypatch.chdir(toy_dir)
    checkpoint = tmp_path / 'c.pth'
    checkpoint.write_bytes(b'never read: refused before')
    with pytest.raises(DatasetCheckError, match=r'model.decode_head.num_classes is 3, but test_dataloader.dataset '
                                                r'has 5 classes \(sky, ground'):
        load_tool('test').main([FPN_TOY, str(checkpoint), '--work-dir', str(tmp_path / 'w'),
                                '--cfg-options', 'model.decode_head.num_classes=3'])


@pytest.fixture
def coco_copy(toy_dir, tmp_path, monkeypatch):
    """A copy of the toy COCO data in a fresh cwd; returns (config, edit(split, fn))."""
    shutil.copytree(toy_dir / 'data' / 'toy_coco', tmp_path / 'data' / 'toy_coco')
    monkeypatch.chdir(tmp_path)
    cfg = Config.fromfile(RETINANET_TOY)
    setup_codebase(cfg)

    def edit(split, change):
        path = tmp_path / 'data' / 'toy_coco' / 'annotations' / f'instances_{split}2017.json'
        data = json.loads(path.read_text())
        change(data['annotations'])
        path.write_text(json.dumps(data))
        return str(path), len(data['annotations'])
    return cfg, edit


def check(cfg):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        check_dataset_and_heads(cfg, ('train_dataloader', 'val_dataloader'))
    return [str(w.message) for w in record]


def test_the_toy_data_passes_unwarned(coco_copy):
    cfg, _ = coco_copy
    assert check(cfg) == []


def test_some_degenerate_boxes_are_counted(coco_copy):
    cfg, edit = coco_copy

    def flatten(anns):
        anns[0]['bbox'][3] = 0  # zero height
        anns[1]['bbox'][2] = 0.5  # under a pixel wide
    path, total = edit('train', flatten)
    assert annotation_counts(path, CLASSES) == {'total': total, 'degenerate': 2, 'unknown': 0}
    messages = check(cfg)
    assert len(messages) == 1
    assert messages[0].startswith(f'train_dataloader.dataset: 2 of the {total} boxes in data/toy_coco/annotations/'
                                  f'instances_train2017.json are degenerate')
    assert 'mmdet drops them, so they train nothing' in messages[0]


def test_all_degenerate_boxes_are_refused(coco_copy, load_tool, tmp_path):
    _cfg, edit = coco_copy

    def flatten(anns):
        for ann in anns:
            ann['bbox'][2] = 0
    _, total = edit('train', flatten)
    with pytest.raises(DatasetCheckError, match=f'every one of the {total} annotations .* would be dropped: '
                                                f'{total} are degenerate boxes'):
        load_tool('train').main([RETINANET_TOY, '--work-dir', str(tmp_path / 'w')])


def test_unknown_category_ids_in_validation_are_counted(coco_copy):
    cfg, edit = coco_copy

    def unknown(anns):
        anns[0]['category_id'] = 99
    _, total = edit('val', unknown)
    messages = check(cfg)
    assert len(messages) == 1
    assert messages[0].startswith(f'val_dataloader.dataset: 1 of the {total} annotations')
    assert 'category_id none of the dataset\'s 3 classes has' in messages[0]
    assert 'the reported mAP is higher than the true one' in messages[0]


def test_all_unknown_category_ids_are_refused(coco_copy):
    cfg, edit = coco_copy

    def unknown(anns):
        for ann in anns:
            ann['category_id'] = 99
    _, total = edit('val', unknown)
    with pytest.raises(DatasetCheckError, match=f'val_dataloader.dataset: every one of the {total} annotations .* '
                                                f'{total} have a category_id none of'):
        check(cfg)
