"""Toy ADE20K: a sky / ground scene with coloured shapes, in ADE20K's layout.

    ROOT/images/{training,validation}/ADE_{train,val}_00000001.jpg ...
    ROOT/annotations/{training,validation}/ADE_{train,val}_00000001.png
    ROOT/toy_meta.json

Label maps follow ADE20K: 0 = unlabelled (here: a thin band along every object
outline), 1..K = TOY_ADE_CLASSES; mmseg's ADE20KDataset (reduce_zero_label=True)
turns 0 into the ignore index and k into k - 1.
"""
import os
import os.path as osp

import cv2
import numpy as np

from .folder import build_folder
from .shapes import (
    SHAPES,
    ToyObject,
    draw_object,
    finish,
    noisy_background,
    object_mask,
    outline_band,
    place_objects,
    toy_settings,
)

TOY_ADE_CLASSES: tuple[str, ...] = ('sky', 'ground', 'circle', 'square', 'triangle')
TOY_ADE_PALETTE: list[tuple[int, int, int]] = [(200, 215, 230), (140, 110, 70)] + [
    SHAPES[c][0] for c in TOY_ADE_CLASSES[2:]]
DEFAULT_ADE_ROOT = 'data/toy_ade'
GENERATOR_VERSION = 2  # 2: paler sky, so that blue triangles stand out
SPLITS = {'training': ('train', 0), 'validation': ('val', 1)}


def ade_settings(num_train: int = 200, num_val: int = 40, **kwargs) -> dict:
    """Checked, JSON-able settings of the toy ADE generator; ``kwargs`` (image_size,
    objects_per_image, object_size, seed) as ``shapes.toy_settings``."""
    return toy_settings('ade', GENERATOR_VERSION, TOY_ADE_CLASSES, num_train=num_train, num_val=num_val, **kwargs)


def render_layers(settings: dict, stream: int, index: int) -> tuple[np.ndarray, np.ndarray, list[ToyObject]]:
    """Scene ``index`` of random stream ``stream`` (0: training, 1: validation) before labelling:
    the (H, W, 3) uint8 RGB image, an (H, W) bool mask of the sky (the rest is ground) and the
    objects drawn over both. The toy COCO panoptic data label the same scenes."""
    rng = np.random.default_rng([settings['seed'], stream, index])
    h, w = settings['image_size']
    # wavy horizon between 30% and 60% of the height
    cols = np.arange(w)
    horizon = (h * rng.uniform(0.3, 0.6) + h * 0.06 * np.sin(cols / w * 2 * np.pi * rng.uniform(0.5, 2)
                                                               + rng.uniform(0, 2 * np.pi)))
    is_sky = np.arange(h)[:, None] < horizon[None, :]
    sky = noisy_background(rng, h, w, base=TOY_ADE_PALETTE[0])
    ground = noisy_background(rng, h, w, base=TOY_ADE_PALETTE[1])
    image = np.where(is_sky[..., None], sky, ground)
    lo, hi = settings['objects_per_image']
    objects = place_objects(rng, h, w, int(rng.integers(lo, hi + 1)), tuple(settings['object_size']),
                            TOY_ADE_CLASSES[2:])
    for obj in objects:
        draw_object(image, obj, rng)
    return finish(image, rng), is_sky, objects


def render_scene(settings: dict, split: str, index: int) -> tuple[np.ndarray, np.ndarray]:
    """Scene ``index`` of ``split``: (H, W, 3) uint8 RGB image and (H, W) uint8 label map (0..K)."""
    image, is_sky, objects = render_layers(settings, SPLITS[split][1], index)
    h, w = settings['image_size']
    label = np.where(is_sky, 1 + TOY_ADE_CLASSES.index('sky'), 1 + TOY_ADE_CLASSES.index('ground')).astype(np.uint8)
    for obj in objects:
        mask = object_mask(obj, h, w)
        label[mask] = 1 + TOY_ADE_CLASSES.index(obj.name)
        label[outline_band(mask)] = 0  # anti-aliased outline: unlabelled, as ADE20K leaves many boundaries
    return image, label


def make_toy_ade(root: str = DEFAULT_ADE_ROOT, force: bool = False, **kwargs) -> str:
    """Generates the toy ADE20K folder at ``root`` unless it exists; returns its absolute path.

    kwargs: see ``ade_settings``. Deterministic: the same settings give the same files.
    """
    settings = ade_settings(**kwargs)

    def fill(tmp: str) -> None:
        for split, (short, _) in SPLITS.items():
            img_dir, ann_dir = osp.join(tmp, 'images', split), osp.join(tmp, 'annotations', split)
            os.makedirs(img_dir)
            os.makedirs(ann_dir)
            for k in range(settings['num_train' if short == 'train' else 'num_val']):
                image, label = render_scene(settings, split, k)
                stem = f'ADE_{short}_{k + 1:08d}'
                cv2.imwrite(osp.join(img_dir, stem + '.jpg'), image[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 92])
                cv2.imwrite(osp.join(ann_dir, stem + '.png'), label)

    return build_folder(root, settings, fill, force=force)
