"""Toy Cityscapes: wide (2:1) street scenes in Cityscapes' layout, labelled with its 19 train ids.

    ROOT/leftImg8bit/{train,val}/<city>/<city>_<seq>_<frame>_leftImg8bit.png
    ROOT/gtFine/{train,val}/<city>/<city>_<seq>_<frame>_gtFine_labelTrainIds.png
    ROOT/toy_meta.json

A scene: sky above a skyline of buildings, road below the horizon, trees (triangles, ``vegetation``)
and traffic signs (circles) anywhere, cars (squares) on the road, and the hood of the ego vehicle along
the bottom. Six of the 19 classes occur (road, building, traffic sign, vegetation, sky, car); the label
maps hold train ids (0..18) and 255 (ignored) on the hood and on the one-pixel band along every object
outline, as the ``*_gtFine_labelTrainIds.png`` files that Cityscapes' scripts derive from its
``*_gtFine_labelIds.png`` (the ego vehicle's label has train id 255 there too).
"""
import os
import os.path as osp

import cv2
import numpy as np

from .folder import build_folder
from .shapes import (
    ToyObject,
    draw_object,
    finish,
    noisy_background,
    object_mask,
    outline_band,
    place_objects,
    toy_settings,
)

# Cityscapes' 19 evaluated classes in train-id order (mmseg's CityscapesDataset.METAINFO['classes'])
CITYSCAPES_CLASSES: tuple[str, ...] = (
    'road', 'sidewalk', 'building', 'wall', 'fence', 'pole', 'traffic light', 'traffic sign', 'vegetation',
    'terrain', 'sky', 'person', 'rider', 'car', 'truck', 'bus', 'train', 'motorcycle', 'bicycle')
IGNORE = 255
# the shapes standing for things of the street, and the classes the scenes hold
SHAPE_CLASSES = {'triangle': 'vegetation', 'circle': 'traffic sign', 'square': 'car'}
TOY_CITYSCAPES_PRESENT: tuple[str, ...] = ('road', 'building', 'traffic sign', 'vegetation', 'sky', 'car')
# image colours, near Cityscapes' palette where it tells the classes apart (RGB)
COLOURS = {'sky': (200, 215, 230), 'building': (110, 110, 115), 'road': (128, 64, 128),
           'vegetation': (80, 150, 40), 'traffic sign': (230, 210, 20), 'car': (30, 60, 220), 'hood': (40, 40, 45)}
CITIES = {'train': ('aachen', 'bremen'), 'val': ('frankfurt', 'lindau')}  # real cities of each split
FRAME = 19  # Cityscapes' fine annotations are of the 20th frame of each snippet: <seq>_000019
DEFAULT_CITYSCAPES_ROOT = 'data/toy_cityscapes'
GENERATOR_VERSION = 1
SPLITS = {'train': 0, 'val': 1}


def cityscapes_settings(num_train: int = 100, num_val: int = 20, image_size: int | tuple[int, int] = 128,
                        **kwargs) -> dict:
    """Checked, JSON-able settings of the toy Cityscapes generator. ``image_size``: (height, width), or
    an int: the height, the width twice it (Cityscapes' 1024x2048 is 2:1). ``kwargs`` (objects_per_image,
    object_size, seed) as ``shapes.toy_settings``; the objects are sized by the height."""
    size = (image_size, 2 * image_size) if isinstance(image_size, int) else tuple(image_size)
    return toy_settings('cityscapes', GENERATOR_VERSION, TOY_CITYSCAPES_PRESENT, num_train=num_train,
                          num_val=num_val, image_size=size, **kwargs)


def file_stem(split: str, index: int) -> tuple[str, str]:
    """(city, '<city>_<seq>_<frame>') of image ``index`` of ``split``: the cities take turns."""
    cities = CITIES[split]
    city = cities[index % len(cities)]
    return city, f'{city}_{index // len(cities):06d}_{FRAME:06d}'


def render_street(settings: dict, split: str, index: int) -> tuple[np.ndarray, np.ndarray]:
    """Scene ``index`` of ``split``: (H, W, 3) uint8 RGB image and (H, W) uint8 train-id map (255: ignored)."""
    rng = np.random.default_rng([settings['seed'], SPLITS[split], index])
    h, w = settings['image_size']
    train_id = {name: CITYSCAPES_CLASSES.index(name) for name in TOY_CITYSCAPES_PRESENT}
    horizon = int(h * rng.uniform(0.45, 0.6))
    label = np.full((h, w), train_id['road'], np.uint8)
    label[:horizon] = train_id['sky']
    x = 0
    while x < w:  # a skyline of buildings of random widths and heights, standing on the horizon
        width = int(rng.uniform(0.08, 0.25) * w)
        top = int(horizon - h * rng.uniform(0.12, 0.4))
        label[max(top, 0):horizon, x:x + width] = train_id['building']
        x += width
    image = np.zeros((h, w, 3), np.float32)
    for name in ('sky', 'building', 'road'):
        image[label == train_id[name]] = noisy_background(rng, h, w, base=COLOURS[name])[label == train_id[name]]

    lo, hi = settings['objects_per_image']
    size = tuple(settings['object_size'])
    objects: list[ToyObject] = place_objects(rng, h, w, int(rng.integers(lo, hi + 1)), size, ('triangle', 'circle'))
    objects += place_objects(rng, h, w, int(rng.integers(1, 4)), size, ('square',), top=horizon)  # on the road
    for obj in objects:  # later objects cover earlier ones, in the image and in the labels
        name = SHAPE_CLASSES[obj.name]
        draw_object(image, obj, rng, colour=COLOURS[name])
        mask = object_mask(obj, h, w)
        label[mask] = train_id[name]
        label[outline_band(mask)] = IGNORE  # anti-aliased outline
    # the hood of the ego vehicle: a shallow arc along the bottom, ignored as in Cityscapes
    cols = np.arange(w)
    hood_top = h * (0.93 - 0.05 * (1 - ((cols - w / 2) / (w / 2)) ** 2))
    hood = np.arange(h)[:, None] >= hood_top[None, :]
    image[hood] = noisy_background(rng, h, w, base=COLOURS['hood'])[hood]
    label[hood] = IGNORE
    return finish(image, rng), label


def make_toy_cityscapes(root: str = DEFAULT_CITYSCAPES_ROOT, force: bool = False, **kwargs) -> str:
    """Generates the toy Cityscapes folder at ``root`` unless it exists; returns its absolute path.

    kwargs: see ``cityscapes_settings``. Deterministic: the same settings give the same files.
    """
    settings = cityscapes_settings(**kwargs)

    def fill(tmp: str) -> None:
        for split in SPLITS:
            for k in range(settings[f'num_{split}']):
                city, stem = file_stem(split, k)
                img_dir, gt_dir = osp.join(tmp, 'leftImg8bit', split, city), osp.join(tmp, 'gtFine', split, city)
                os.makedirs(img_dir, exist_ok=True)
                os.makedirs(gt_dir, exist_ok=True)
                image, label = render_street(settings, split, k)
                cv2.imwrite(osp.join(img_dir, f'{stem}_leftImg8bit.png'), image[:, :, ::-1])
                cv2.imwrite(osp.join(gt_dir, f'{stem}_gtFine_labelTrainIds.png'), label)

    return build_folder(root, settings, fill, force=force)
