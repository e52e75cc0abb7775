"""Small deterministic synthetic datasets in the real COCO and ADE20K layouts.

``make_toy_coco`` / ``make_toy_ade`` write them (only numpy and OpenCV needed);
``inline_dense.openmmlab.toy_datasets`` registers ``ToyCocoDataset`` (mmdet) and
``ToyADE20KDataset`` (mmseg), which generate their folder on first use.
"""
from .ade import DEFAULT_ADE_ROOT, TOY_ADE_CLASSES, TOY_ADE_PALETTE, ade_settings, make_toy_ade
from .coco import DEFAULT_COCO_ROOT, TOY_COCO_CLASSES, TOY_COCO_PALETTE, coco_settings, make_toy_coco
from .folder import read_stamp

__all__ = ['make_toy_coco', 'make_toy_ade', 'coco_settings', 'ade_settings', 'read_stamp',
           'TOY_COCO_CLASSES', 'TOY_COCO_PALETTE', 'TOY_ADE_CLASSES', 'TOY_ADE_PALETTE',
           'DEFAULT_COCO_ROOT', 'DEFAULT_ADE_ROOT']
