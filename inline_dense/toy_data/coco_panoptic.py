"""Toy COCO panoptic: the toy ADE20K scenes (shapes over a sky / ground background) in COCO's
panoptic layout, the shapes as things and sky and ground as stuff.

    ROOT/train2017/000000000001.jpg ...                   ROOT/val2017/000000100001.jpg ...
    ROOT/annotations/panoptic_{train,val}2017.json        images, annotations (segments_info), categories
    ROOT/annotations/panoptic_{train,val}2017/*.png       segment ids, RGB-encoded: id = R + 256 G + 256^2 B
    ROOT/annotations/instances_{train,val}2017.json       the things as COCO instances (polygons)
    ROOT/toy_meta.json

A segment id is its category id plus 256 times its instance number (things: 1, 2, ... in the image;
stuff: 0), so the PNG's red channel holds the category; 0 (black) is VOID: the one-pixel band along every
object outline, as in the toy ADE20K label maps. A segment's ``area`` and ``bbox`` are its pixels' in
the PNG; an instance's are its polygon's (COCO's instance annotations are polygons too).
"""
import json
import os
import os.path as osp

import cv2
import numpy as np

from .ade import TOY_ADE_PALETTE, render_layers
from .folder import build_folder
from .shapes import SHAPES, ToyObject, object_mask, outline_band, toy_settings

TOY_PANOPTIC_THINGS: tuple[str, ...] = ('circle', 'square', 'triangle')
TOY_PANOPTIC_STUFF: tuple[str, ...] = ('sky', 'ground')
TOY_PANOPTIC_CLASSES: tuple[str, ...] = TOY_PANOPTIC_THINGS + TOY_PANOPTIC_STUFF
TOY_PANOPTIC_PALETTE: list[tuple[int, int, int]] = [SHAPES[c][0] for c in TOY_PANOPTIC_THINGS] + TOY_ADE_PALETTE[:2]
# category ids 1..5, things first (mmdet's panoptic labels put the things before the stuff)
CATEGORY_IDS = {name: i + 1 for i, name in enumerate(TOY_PANOPTIC_CLASSES)}
DEFAULT_COCO_PANOPTIC_ROOT = 'data/toy_coco_panoptic'
GENERATOR_VERSION = 1
SPLITS = {'train': 0, 'val': 1}  # the random stream of the toy ADE20K split the scenes come from
INSTANCE_STEP = 256  # segment id = category id + INSTANCE_STEP * instance number


def coco_panoptic_settings(num_train: int = 400, num_val: int = 50, **kwargs) -> dict:
    """Checked, JSON-able settings of the toy COCO panoptic generator; ``kwargs`` (image_size,
    objects_per_image, object_size, seed) as ``shapes.toy_settings``."""
    return toy_settings('coco_panoptic', GENERATOR_VERSION, TOY_PANOPTIC_CLASSES, num_train=num_train,
                        num_val=num_val, **kwargs)


def rgb_to_id(png: np.ndarray) -> np.ndarray:
    """(H, W, 3) uint8 RGB panoptic PNG -> (H, W) int64 segment ids (COCO's encoding)."""
    png = png.astype(np.int64)
    return png[..., 0] + 256 * png[..., 1] + 256 * 256 * png[..., 2]


def id_to_rgb(ids: np.ndarray) -> np.ndarray:
    """(H, W) segment ids (< 256^3) -> (H, W, 3) uint8 RGB, the inverse of :func:`rgb_to_id`."""
    ids = ids.astype(np.int64)
    return np.stack([ids % 256, ids // 256 % 256, ids // 65536 % 256], -1).astype(np.uint8)


def render_panoptic(settings: dict, split: str, index: int) -> tuple[np.ndarray, np.ndarray, list[ToyObject]]:
    """Scene ``index`` of ``split``: (H, W, 3) uint8 RGB image, (H, W) int64 segment ids (0: VOID)
    and the objects (things) in it, in instance order."""
    image, is_sky, objects = render_layers(settings, SPLITS[split], index)
    h, w = settings['image_size']
    ids = np.where(is_sky, CATEGORY_IDS['sky'], CATEGORY_IDS['ground']).astype(np.int64)
    count = dict.fromkeys(TOY_PANOPTIC_THINGS, 0)
    for obj in objects:
        count[obj.name] += 1
        mask = object_mask(obj, h, w)
        ids[mask] = CATEGORY_IDS[obj.name] + INSTANCE_STEP * count[obj.name]
        ids[outline_band(mask)] = 0
    return image, ids, objects


def segments_info(ids: np.ndarray) -> list[dict]:
    """COCO panoptic ``segments_info`` of a segment-id map: id, category_id, iscrowd, bbox [x, y, w, h]
    and area of each segment's pixels, in id order."""
    segments = []
    for seg_id in np.unique(ids):
        if seg_id == 0:
            continue
        ys, xs = np.nonzero(ids == seg_id)
        x0, y0 = int(xs.min()), int(ys.min())
        segments.append(dict(id=int(seg_id), category_id=int(seg_id % INSTANCE_STEP), iscrowd=0,
                             bbox=[x0, y0, int(xs.max()) - x0 + 1, int(ys.max()) - y0 + 1], area=len(xs)))
    return segments


def _write_split(settings: dict, split: str, root: str) -> tuple[dict, dict]:
    """Writes the split's images and PNGs under ``root``; returns its panoptic and instance json data."""
    img_dir = osp.join(root, f'{split}2017')
    png_dir = osp.join(root, 'annotations', f'panoptic_{split}2017')
    os.makedirs(img_dir)
    os.makedirs(png_dir)
    first_id = 1 + SPLITS[split] * 100000  # ids disjoint across splits, like COCO's
    images: list[dict] = []
    panoptic: list[dict] = []
    instances: list[dict] = []
    for k in range(settings[f'num_{split}']):
        image, ids, objects = render_panoptic(settings, split, k)
        img_id = first_id + k
        stem = f'{img_id:012d}'
        cv2.imwrite(osp.join(img_dir, stem + '.jpg'), image[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 92])
        cv2.imwrite(osp.join(png_dir, stem + '.png'), id_to_rgb(ids)[:, :, ::-1])
        images.append(dict(id=img_id, file_name=stem + '.jpg', height=image.shape[0], width=image.shape[1]))
        panoptic.append(dict(image_id=img_id, file_name=stem + '.png', segments_info=segments_info(ids)))
        for obj in objects:
            instances.append(dict(id=len(instances) + 1 + SPLITS[split] * 1000000, image_id=img_id,
                                  category_id=CATEGORY_IDS[obj.name], segmentation=obj.coco_segmentation(),
                                  area=round(obj.area, 2), bbox=[round(v, 2) for v in obj.bbox_xywh], iscrowd=0))
    info = dict(description='inline_dense toy COCO panoptic (synthetic)', version=str(GENERATOR_VERSION))
    categories = [dict(id=CATEGORY_IDS[name], name=name, supercategory='shape' if name in TOY_PANOPTIC_THINGS
                       else 'background', isthing=int(name in TOY_PANOPTIC_THINGS), color=list(colour))
                  for name, colour in zip(TOY_PANOPTIC_CLASSES, TOY_PANOPTIC_PALETTE)]
    things = [dict(id=c['id'], name=c['name'], supercategory=c['supercategory']) for c in categories if c['isthing']]
    return (dict(info=info, licenses=[], images=images, annotations=panoptic, categories=categories),
            dict(info=info, licenses=[], images=images, annotations=instances, categories=things))


def make_toy_coco_panoptic(root: str = DEFAULT_COCO_PANOPTIC_ROOT, force: bool = False, **kwargs) -> str:
    """Generates the toy COCO panoptic folder at ``root`` unless it exists; returns its absolute path.

    kwargs: see ``coco_panoptic_settings``. Deterministic: the same settings give the same files.
    """
    settings = coco_panoptic_settings(**kwargs)

    def fill(tmp: str) -> None:
        for split in SPLITS:
            panoptic, instances = _write_split(settings, split, tmp)
            for name, data in ((f'panoptic_{split}2017.json', panoptic), (f'instances_{split}2017.json', instances)):
                with open(osp.join(tmp, 'annotations', name), 'w') as f:
                    json.dump(data, f)

    return build_folder(root, settings, fill, force=force)
