"""What MMDetection / MMSegmentation let through silently, checked before a run starts.

* A head whose ``num_classes`` is not the dataset's class count. With fewer, mmdet trains the
  extra classes as background; with more, outputs no annotation ever teaches. Refused.
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
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

# Heads that predict one output per class, by their key under ``model`` (mmdet and mmseg).
CLASS_HEADS = ('bbox_head', 'roi_head.bbox_head', 'roi_head.mask_head', 'decode_head', 'auxiliary_head')


class DatasetCheckError(ValueError):
    """A dataset that does not fit the model, or whose annotations would all be dropped."""


def _datasets(node: Any, where: str) -> List[Tuple[str, dict]]:
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


def dataset_classes(dataset: dict, registry: Any) -> Optional[Tuple[str, ...]]:
    """The class names a dataset config trains on: its ``metainfo.classes``, else its type's
    ``METAINFO['classes']``; None when neither says."""
    classes = (dataset.get('metainfo') or {}).get('classes')
    if not classes:
        kind = dataset.get('type')
        cls = registry.get(kind) if isinstance(kind, str) else kind
        classes = (getattr(cls, 'METAINFO', None) or {}).get('classes')
    return tuple(classes) if classes else None


def class_heads(model: dict) -> Iterator[Tuple[str, int]]:
    """('model.<key>', num_classes) of every per-class head in a model config (cascade stages and
    lists of auxiliary heads by index)."""
    for key in CLASS_HEADS:
        node: Any = model
        for part in key.split('.'):
            node = node.get(part) if isinstance(node, dict) else None
        heads = list(enumerate(node)) if isinstance(node, (list, tuple)) else [(None, node)]
        for index, head in heads:
            if isinstance(head, dict) and isinstance(head.get('num_classes'), int):
                yield f'model.{key}' + ('' if index is None else f'.{index}'), head['num_classes']


def check_head_classes(cfg: Any, loaders: Sequence[str], registry: Any) -> None:
    """Raises :class:`DatasetCheckError` when a head's ``num_classes`` differs from the class count
    of a dataset of ``loaders``, naming both numbers, the classes and the settings to change."""
    heads = list(class_heads(cfg.get('model') or {}))
    for loader in loaders:
        for key, dataset in _datasets((cfg.get(loader) or {}).get('dataset'), f'{loader}.dataset'):
            classes = dataset_classes(dataset, registry)
            if classes is None:
                continue
            wrong = [(head, n) for head, n in heads if n != len(classes)]
            if not wrong:
                continue
            names = ', '.join(classes[:6]) + (', ...' if len(classes) > 6 else '')
            lines = '; '.join(f'{head}.num_classes is {n}' for head, n in wrong)
            fewer = any(n < len(classes) for _, n in wrong)
            consequence = ('the classes beyond it would be trained as background' if fewer else
                           'the outputs beyond its classes would never be trained')
            raise DatasetCheckError(
                f'{lines}, but {key} has {len(classes)} classes ({names}): {consequence}. Set num_classes='
                f'{len(classes)} on every head ('
                + ' '.join(f'--cfg-options {head}.num_classes={len(classes)}' for head, _ in wrong[:2])
                + (' ...' if len(wrong) > 2 else '')
                + f'), or give the dataset the classes the head has ({key}.metainfo=dict(classes=(...)), the '
                  f'same for the other dataloaders).')


def annotation_counts(ann_file: str, classes: Sequence[str]) -> Dict[str, int]:
    """Counts over a COCO-style annotation file, by mmdet's ``CocoDataset`` parsing rules:
    'total' annotations (those marked ``ignore`` aside), 'degenerate' (under 1 px wide or high,
    zero area, or no overlap with the image), 'unknown' (a ``category_id`` that is none of
    ``classes``' categories; degenerate ones counted once, as degenerate)."""
    with open(ann_file) as f:
        data = json.load(f)
    known = {c.get('id') for c in data.get('categories') or [] if c.get('name') in set(classes)}
    sizes = {im.get('id'): (im.get('width'), im.get('height')) for im in data.get('images') or []}
    counts = {'total': 0, 'degenerate': 0, 'unknown': 0}
    for ann in data.get('annotations') or []:
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
    check_head_classes(cfg, loaders, registry)
    check_annotations(cfg, loaders, registry)
