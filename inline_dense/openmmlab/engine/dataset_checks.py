"""What MMDetection / MMSegmentation let through silently, checked before a run starts.

* A head whose ``num_classes`` is not the dataset's class count (Mask2Former's and MaskFormer's
  ``num_things_classes`` / ``num_stuff_classes`` against the dataset's thing and stuff classes).
  With fewer, mmdet trains the extra classes as background (Mask2Former: as "no object"); with
  more, outputs no annotation ever teaches, or an ``IndexError`` deep in a loss or a metric.
  Refused.
* A softmax classifier's ``loss_cls.class_weight`` whose length is not the head's classes plus
  one (the background / "no object" weight last). Refused.
* COCO-style annotations mmdet's ``CocoDataset`` drops while parsing: boxes under one pixel wide
  or high, of zero area or outside their image ("degenerate"), and annotations whose
  ``category_id`` names none of the dataset's classes. Dropped training boxes train nothing
  (all of them dropped: ``loss_bbox`` 0); dropped validation ground truths are not counted as
  missed, so the reported mAP is higher than the true one. Warned with the counts; refused
  when every annotation of a file is dropped (a wrong file or a wrong class list).

The annotation files are read here once more (mmdet reads them again to build the datasets):
for COCO 2017's 450 MB train file that is some seconds and its memory, once per start.
"""
import json
import os.path as osp
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

# Heads that predict one output per class, by their key under ``model`` (mmdet and mmseg).
CLASS_HEADS = ('bbox_head', 'roi_head.bbox_head', 'roi_head.mask_head', 'decode_head', 'auxiliary_head')
# mmdet's Mask2Former / MaskFormer heads count thing and stuff classes apart.
PANOPTIC_HEADS = ('panoptic_head', 'panoptic_fusion_head')


class DatasetCheckError(ValueError):
    """A dataset that does not fit the model, or whose annotations would all be dropped."""


def _datasets(node: Any, where: str) -> list[tuple[str, dict]]:
    """(config key, dataset dict) of the datasets inside a dataloader's dataset (wrappers included)."""
    if not isinstance(node, dict):
        return []
    inner = node.get('dataset')
    children = node.get('datasets') or []
    found = [] if inner is not None or children else [(where, node)]
    found += _datasets(inner, f'{where}.dataset')
    for i, child in enumerate(children):
        found += _datasets(child, f'{where}.datasets.{i}')
    return found


def _meta(dataset: dict, registry: Any, name: str) -> tuple[str, ...] | None:
    """A dataset config's ``metainfo[name]``, else its type's ``METAINFO[name]``; None when neither has it."""
    values = (dataset.get('metainfo') or {}).get(name)
    if values is None:
        kind = dataset.get('type')
        cls = registry.get(kind) if isinstance(kind, str) else kind
        values = (getattr(cls, 'METAINFO', None) or {}).get(name)
    return tuple(values) if values is not None else None


def dataset_classes(dataset: dict, registry: Any) -> tuple[str, ...] | None:
    """The class names a dataset config trains on: its ``metainfo.classes``, else its type's
    ``METAINFO['classes']``; None when neither says."""
    return _meta(dataset, registry, 'classes') or None


def _node(model: dict, key: str) -> Any:
    node: Any = model
    for part in key.split('.'):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _heads(model: dict) -> Iterator[tuple[str, dict]]:
    """('model.<key>', head dict) of every per-class head (cascade stages and lists by index)."""
    for key in (*CLASS_HEADS, *PANOPTIC_HEADS):
        node = _node(model, key)
        heads = list(enumerate(node)) if isinstance(node, (list, tuple)) else [(None, node)]
        for index, head in heads:
            if isinstance(head, dict):
                yield f'model.{key}' + ('' if index is None else f'.{index}'), head


def class_settings(model: dict) -> Iterator[tuple[str, str, int]]:
    """(setting, which of the dataset's classes it counts: 'classes' | 'thing_classes' |
    'stuff_classes', its value) of every per-class head in a model config."""
    for where, head in _heads(model):
        if isinstance(head.get('num_classes'), int):
            yield f'{where}.num_classes', 'classes', head['num_classes']
        things, stuff = head.get('num_things_classes'), head.get('num_stuff_classes')
        if isinstance(things, int) and isinstance(stuff, int):
            yield f'{where}.num_things_classes', 'thing_classes', things
            yield f'{where}.num_stuff_classes', 'stuff_classes', stuff


def expected_counts(dataset: dict, registry: Any) -> dict[str, int] | None:
    """The dataset's class counts by kind ('classes', 'thing_classes', 'stuff_classes'): an instance
    dataset's classes are all things; None when the dataset does not say its classes."""
    classes = dataset_classes(dataset, registry)
    if classes is None:
        return None
    things = _meta(dataset, registry, 'thing_classes')
    stuff = _meta(dataset, registry, 'stuff_classes')
    if things is None or stuff is None:
        things, stuff = classes, ()
    return {'classes': len(classes), 'thing_classes': len(things), 'stuff_classes': len(stuff)}


def check_head_classes(cfg: Any, loaders: Sequence[str], registry: Any) -> None:
    """Raises :class:`DatasetCheckError` when a head's ``num_classes`` (or Mask2Former's thing and
    stuff counts) differs from the class count of a dataset of ``loaders``, naming both numbers,
    the classes and the settings to change."""
    settings = list(class_settings(cfg.get('model') or {}))
    for loader in loaders:
        for key, dataset in _datasets((cfg.get(loader) or {}).get('dataset'), f'{loader}.dataset'):
            counts = expected_counts(dataset, registry)
            if counts is None:
                continue
            wrong = [(setting, kind, n) for setting, kind, n in settings if n != counts[kind]]
            if not wrong:
                continue
            classes = dataset_classes(dataset, registry) or ()
            names = ', '.join(classes[:6]) + (', ...' if len(classes) > 6 else '')
            lines = '; '.join(f'{setting} is {n}' for setting, _, n in wrong)
            split = ('' if all(kind == 'classes' for _, kind, _ in wrong) else
                     f'; {counts["thing_classes"]} thing and {counts["stuff_classes"]} stuff classes')
            fewer = any(n < counts[kind] for _, kind, n in wrong)
            consequence = ('the classes beyond it would be trained as background' if fewer else
                           'the outputs beyond its classes would never be trained')
            raise DatasetCheckError(
                f'{lines}, but {key} has {len(classes)} classes ({names}{split}): {consequence}. Set them to the '
                f"dataset's counts on every head ("
                + ' '.join(f'--cfg-options {setting}={counts[kind]}' for setting, kind, _ in wrong[:2])
                + (' ...' if len(wrong) > 2 else '')
                + f'), or give the dataset the classes the head has ({key}.metainfo=dict(classes=(...)), the '
                  f'same for the other dataloaders).')


def check_class_weights(model: dict) -> None:
    """Raises :class:`DatasetCheckError` when a softmax classifier's ``loss_cls.class_weight`` is not
    one weight per class plus the background / "no object" weight (Mask2Former, the R-CNN heads)."""
    for where, head in _heads(model):
        loss = head.get('loss_cls')
        weights = loss.get('class_weight') if isinstance(loss, dict) else None
        if not isinstance(weights, (list, tuple)) or loss.get('use_sigmoid', False):
            continue
        if isinstance(head.get('num_things_classes'), int) and isinstance(head.get('num_stuff_classes'), int):
            classes, named = head['num_things_classes'] + head['num_stuff_classes'], (
                f'{head["num_things_classes"]} + {head["num_stuff_classes"]} classes (num_things_classes + '
                'num_stuff_classes)')
        elif isinstance(head.get('num_classes'), int):
            classes, named = head['num_classes'], f'{head["num_classes"]} classes (num_classes)'
        else:
            continue
        if len(weights) != classes + 1:
            raise DatasetCheckError(
                f'{where}.loss_cls.class_weight has {len(weights)} entries, but the head has {named}: it needs '
                f'{classes + 1}, one per class and the background / "no object" weight last, e.g. '
                f'class_weight=[1.0] * {classes} + [0.1].')


def annotation_counts(ann_file: str, classes: Sequence[str]) -> dict[str, int]:
    """Counts over a COCO-style annotation file (instances, or panoptic segments), by mmdet's ``CocoDataset``
    parsing rules:
    'total' annotations (those marked ``ignore`` aside), 'degenerate' (under 1 px wide or high,
    zero area, or no overlap with the image), 'unknown' (a ``category_id`` that is none of
    ``classes``' categories; degenerate ones counted once, as degenerate)."""
    with open(ann_file) as f:
        data = json.load(f)
    known = {c.get('id') for c in data.get('categories') or [] if c.get('name') in set(classes)}
    sizes = {im.get('id'): (im.get('width'), im.get('height')) for im in data.get('images') or []}
    counts = {'total': 0, 'degenerate': 0, 'unknown': 0}
    # a COCO panoptic file holds one annotation per image, its segments in segments_info: count those
    # (what CocoPanopticDataset parses), each with its image's id
    anns = [dict(seg, image_id=ann.get('image_id')) for ann in data.get('annotations') or []
            for seg in ann.get('segments_info', [ann])]
    for ann in anns:
        if ann.get('ignore', False):
            continue
        counts['total'] += 1
        x, y, w, h = ann.get('bbox') or (0, 0, 0, 0)
        width, height = sizes.get(ann.get('image_id'), (None, None))
        outside = width is not None and height is not None and (
            max(0, min(x + w, width) - max(x, 0)) * max(0, min(y + h, height) - max(y, 0)) == 0)
        if outside or ann.get('area', 0) <= 0 or w < 1 or h < 1:
            counts['degenerate'] += 1
        elif ann.get('category_id') not in known:
            counts['unknown'] += 1
    return counts


def check_annotations(cfg: Any, loaders: Sequence[str], registry: Any) -> None:
    """Warns about degenerate boxes and unknown category ids in the COCO-style annotation files of
    ``loaders`` with their counts; raises :class:`DatasetCheckError` when a file's annotations
    would all be dropped. Files not on disk yet (toy datasets made on first use) are skipped."""
    for loader in loaders:
        training = loader.startswith('train')
        for key, dataset in _datasets((cfg.get(loader) or {}).get('dataset'), f'{loader}.dataset'):
            ann = dataset.get('ann_file')
            classes = dataset_classes(dataset, registry)
            if not isinstance(ann, str) or not ann.endswith('.json') or classes is None:
                continue
            path = osp.join(dataset.get('data_root') or '', ann)
            if not osp.isfile(path):
                continue
            counts = annotation_counts(path, classes)
            total, degenerate, unknown = counts['total'], counts['degenerate'], counts['unknown']
            if total == 0:
                continue
            if degenerate + unknown == total:
                why = (f'{unknown} have a category_id none of the dataset\'s {len(classes)} classes has'
                       if unknown else '')
                why += (' and ' if unknown and degenerate else '') + (
                    f'{degenerate} are degenerate boxes (under 1 px wide or high, zero area, or outside the image)'
                    if degenerate else '')
                raise DatasetCheckError(
                    f'{key}: every one of the {total} annotations in {path} would be dropped: {why}. A wrong '
                    f'annotation file, or classes that are not this file\'s: check {key}.ann_file and '
                    f'{key}.metainfo.classes (the categories\' names must match them).')
            if degenerate:
                effect = 'they train nothing' if training else 'they are not evaluated'
                warnings.warn(f'{key}: {degenerate} of the {total} boxes in {path} are degenerate (under 1 px wide '
                              f'or high, zero area, or outside the image); mmdet drops them, so {effect}.',
                              stacklevel=2)
            if unknown:
                effect = ('they are not trained on' if training else
                          'they are not counted as missed either, so the reported mAP is higher than the true one')
                warnings.warn(f'{key}: {unknown} of the {total} annotations in {path} have a category_id none of '
                              f'the dataset\'s {len(classes)} classes has; mmdet drops them, so {effect}. Add '
                              f'their classes to {key}.metainfo.classes, or remove them from the file.',
                              stacklevel=2)


def check_dataset_and_heads(cfg: Any, loaders: Sequence[str]) -> None:
    """Both checks for the datasets of ``loaders`` of an mmdet or mmseg config (its default scope's
    dataset registry gives each dataset type's classes)."""
    import importlib
    scope = cfg.get('default_scope') or 'mmdet'
    registry = importlib.import_module(f'{scope}.registry').DATASETS
    check_class_weights(cfg.get('model') or {})
    check_head_classes(cfg, loaders, registry)
    check_annotations(cfg, loaders, registry)
