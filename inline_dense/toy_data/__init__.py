"""Small deterministic synthetic datasets in the real COCO, COCO panoptic, ADE20K and Cityscapes layouts.

``make_toy_coco`` / ``make_toy_coco_panoptic`` / ``make_toy_ade`` / ``make_toy_cityscapes`` write them
(only numpy and OpenCV needed); ``inline_dense.openmmlab.toy_datasets`` registers ``ToyCocoDataset``,
``ToyCocoPanopticDataset`` (mmdet), ``ToyADE20KDataset`` and ``ToyCityscapesDataset`` (mmseg), which
generate their folder on first use.
"""
from .ade import DEFAULT_ADE_ROOT, TOY_ADE_CLASSES, TOY_ADE_PALETTE, ade_settings, make_toy_ade
from .cityscapes import (
                         CITYSCAPES_CLASSES,
                         DEFAULT_CITYSCAPES_ROOT,
                         TOY_CITYSCAPES_PRESENT,
                         cityscapes_settings,
                         make_toy_cityscapes,
)
from .coco import DEFAULT_COCO_ROOT, TOY_COCO_CLASSES, TOY_COCO_PALETTE, coco_settings, make_toy_coco
from .coco_panoptic import (
                         DEFAULT_COCO_PANOPTIC_ROOT,
                         TOY_PANOPTIC_CLASSES,
                         TOY_PANOPTIC_PALETTE,
                         TOY_PANOPTIC_STUFF,
                         TOY_PANOPTIC_THINGS,
                         coco_panoptic_settings,
                         make_toy_coco_panoptic,
)
from .folder import read_stamp

__all__ = ['make_toy_coco', 'make_toy_ade', 'make_toy_coco_panoptic', 'make_toy_cityscapes',
           'coco_settings', 'ade_settings', 'coco_panoptic_settings', 'cityscapes_settings', 'read_stamp',
           'TOY_COCO_CLASSES', 'TOY_COCO_PALETTE', 'TOY_ADE_CLASSES', 'TOY_ADE_PALETTE',
           'TOY_PANOPTIC_CLASSES', 'TOY_PANOPTIC_THINGS', 'TOY_PANOPTIC_STUFF', 'TOY_PANOPTIC_PALETTE',
           'CITYSCAPES_CLASSES', 'TOY_CITYSCAPES_PRESENT',
           'DEFAULT_COCO_ROOT', 'DEFAULT_ADE_ROOT', 'DEFAULT_COCO_PANOPTIC_ROOT', 'DEFAULT_CITYSCAPES_ROOT']
