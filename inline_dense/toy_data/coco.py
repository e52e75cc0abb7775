"""Toy COCO: coloured circles / squares / triangles on noisy backgrounds, in COCO's layout.

    ROOT/train2017/000000000001.jpg ...
    ROOT/val2017/000000100001.jpg ...
    ROOT/annotations/instances_{train,val}2017.json   (polygons, bbox, area, iscrowd)
    ROOT/toy_meta.json                                 (the settings used)
"""
import json
import os
import os.path as osp

import cv2
import numpy as np

from .folder import build_folder
from .shapes import SHAPES, ToyObject, draw_object, finish, noisy_background, place_objects, toy_settings

TOY_COCO_CLASSES: tuple[str, ...] = ('circle', 'square', 'triangle')
TOY_COCO_PALETTE: list[tuple[int, int, int]] = [SHAPES[c][0] for c in TOY_COCO_CLASSES]
DEFAULT_COCO_ROOT = 'data/toy_coco'
GENERATOR_VERSION = 1
SPLITS = {'train': 0, 'val': 1}


def coco_settings(num_train: int = 400, num_val: int = 50, **kwargs) -> dict:
    """Checked, JSON-able settings of the toy COCO generator; ``kwargs`` (image_size,
    objects_per_image, object_size, seed) as ``shapes.toy_settings``."""
    return toy_settings('coco', GENERATOR_VERSION, TOY_COCO_CLASSES, num_train=num_train, num_val=num_val, **kwargs)


def render_image(settings: dict, split: str, index: int) -> tuple[np.ndarray, list[ToyObject]]:
    """Image ``index`` of ``split``: (H, W, 3) uint8 RGB and its objects. Pure function of its args."""
    rng = np.random.default_rng([settings['seed'], SPLITS[split], index])
    h, w = settings['image_size']
    lo, hi = settings['objects_per_image']
    objects = place_objects(rng, h, w, int(rng.integers(lo, hi + 1)), tuple(settings['object_size']),
                            TOY_COCO_CLASSES)
    image = noisy_background(rng, h, w)
    for obj in objects:
        draw_object(image, obj, rng)
    return finish(image, rng), objects


def _split_json(settings: dict, split: str, img_dir: str) -> dict:
    num = settings[f'num_{split}']
    first_id = 1 + SPLITS[split] * 100000  # ids disjoint across splits, like COCO's
    images, annotations = [], []
    cat_id = {name: i + 1 for i, name in enumerate(TOY_COCO_CLASSES)}
    for k in range(num):
        image, objects = render_image(settings, split, k)
        img_id = first_id + k
        file_name = f'{img_id:012d}.jpg'
        cv2.imwrite(osp.join(img_dir, file_name), image[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 92])
        images.append(dict(id=img_id, file_name=file_name, height=image.shape[0], width=image.shape[1]))
        for obj in objects:
            annotations.append(dict(id=len(annotations) + 1 + SPLITS[split] * 1000000, image_id=img_id,
                                    category_id=cat_id[obj.name], segmentation=obj.coco_segmentation(),
                                    area=round(obj.area, 2), bbox=[round(v, 2) for v in obj.bbox_xywh],
                                    iscrowd=0))
    categories = [dict(id=i, name=name, supercategory='shape') for name, i in cat_id.items()]
    info = dict(description='inline_dense toy COCO (synthetic)', version=str(GENERATOR_VERSION))
    return dict(info=info, licenses=[], images=images, annotations=annotations, categories=categories)


def make_toy_coco(root: str = DEFAULT_COCO_ROOT, force: bool = False, **kwargs) -> str:
    """Generates the toy COCO folder at ``root`` unless it exists; returns its absolute path.

    kwargs: see ``coco_settings``. Deterministic: the same settings give the same files.
    """
    settings = coco_settings(**kwargs)

    def fill(tmp: str) -> None:
        os.makedirs(osp.join(tmp, 'annotations'))
        for split in SPLITS:
            img_dir = osp.join(tmp, f'{split}2017')
            os.makedirs(img_dir)
            data = _split_json(settings, split, img_dir)
            with open(osp.join(tmp, 'annotations', f'instances_{split}2017.json'), 'w') as f:
                json.dump(data, f)

    return build_folder(root, settings, fill, force=force)
