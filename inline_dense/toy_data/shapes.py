"""Drawing the toy objects: a polygon per object, rendered into an image and a mask.

All coordinates are (x, y) pixels, float64. Images are uint8 RGB (H, W, 3).
"""
import math
from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

# Class name -> (RGB colour, number of polygon vertices). A circle is a 32-gon.
SHAPES = {
    'circle': ((220, 50, 40), 32),
    'square': ((40, 190, 60), 4),
    'triangle': ((40, 70, 230), 3),
}


@dataclass
class ToyObject:
    """One drawn object: its class name and outline polygon (N, 2) in (x, y) pixels."""

    name: str
    polygon: np.ndarray

    @property
    def bbox_xywh(self) -> list[float]:
        x0, y0 = self.polygon.min(0)
        x1, y1 = self.polygon.max(0)
        return [float(x0), float(y0), float(x1 - x0), float(y1 - y0)]

    @property
    def area(self) -> float:
        """Shoelace area of the polygon."""
        x, y = self.polygon[:, 0], self.polygon[:, 1]
        return float(0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))))

    def coco_segmentation(self) -> list[list[float]]:
        """COCO polygon format: [[x1, y1, x2, y2, ...]], rounded to 0.01 px."""
        return [[round(float(v), 2) for v in self.polygon.reshape(-1)]]


def default_object_size(side: int) -> tuple[int, int]:
    """(min, max) object diameter for images whose shorter side is ``side`` pixels."""
    return max(4, round(side * 5 / 32)), round(side * 15 / 32)


def toy_settings(kind: str, version: int, classes: Sequence[str], num_train: int, num_val: int,
                 image_size: int | Sequence[int] = 128, objects_per_image: Sequence[int] = (1, 4),
                 object_size: Sequence[int] | None = None, seed: int = 0) -> dict:
    """Checked, JSON-able generator settings of a toy dataset (``coco_settings``, ``ade_settings``).

    kind: 'coco' or 'ade' (stored, and named in errors); version: of that kind's generator;
    classes: stored, so that a folder says what it holds. image_size: int or (height, width).
    object_size: (min, max) diameter of the objects in pixels; default 5/32 to 15/32 of the
    shorter side (20-60 px on 128 px images).
    """
    name = f'toy {kind.upper()}'
    h, w = (image_size, image_size) if isinstance(image_size, int) else tuple(image_size)
    if object_size is None:
        object_size = default_object_size(min(h, w))
    lo, hi = (int(v) for v in object_size)
    if not 4 <= lo <= hi or hi > min(h, w) - 4:
        raise ValueError(f'{name}: object_size {tuple(object_size)} must satisfy 4 <= min <= max <= '
                         f'image side - 4 = {min(h, w) - 4}.')
    if num_train < 1 or num_val < 1:
        raise ValueError(f'{name}: need at least one image per split (got num_train={num_train}, '
                         f'num_val={num_val}).')
    return dict(kind=kind, version=version, num_train=int(num_train), num_val=int(num_val),
                image_size=[int(h), int(w)], objects_per_image=[int(v) for v in objects_per_image],
                object_size=[lo, hi], seed=int(seed), classes=list(classes))


def shape_polygon(name: str, center: tuple[float, float], size: float, angle: float) -> np.ndarray:
    """Vertices (N, 2) of a regular shape whose bounding circle has diameter ``size``."""
    _, n = SHAPES[name]
    radius = size / 2.0  # every vertex lies on the bounding circle (a square's diagonal is ``size``)
    theta = angle + np.arange(n) * (2 * math.pi / n)
    return np.stack([center[0] + radius * np.cos(theta), center[1] + radius * np.sin(theta)], 1)


def place_objects(rng: np.random.Generator, height: int, width: int, num: int,
                  size_range: tuple[int, int], classes: tuple[str, ...],
                  top: int = 0, max_tries: int = 200) -> list[ToyObject]:
    """Up to ``num`` non-overlapping objects fully inside the image (rows >= ``top``)."""
    objects: list[ToyObject] = []
    circles: list[tuple[float, float, float]] = []
    for _ in range(num):
        for _ in range(max_tries):
            size = float(rng.uniform(*size_range))
            r = size / 2.0
            lo_y = top + r + 1
            if lo_y >= height - r - 1:
                break
            cx = float(rng.uniform(r + 1, width - r - 1))
            cy = float(rng.uniform(lo_y, height - r - 1))
            if all(math.hypot(cx - ox, cy - oy) > r + orr + 3 for ox, oy, orr in circles):
                name = classes[int(rng.integers(len(classes)))]
                angle = float(rng.uniform(0, 2 * math.pi))
                objects.append(ToyObject(name, shape_polygon(name, (cx, cy), size, angle)))
                circles.append((cx, cy, r))
                break
    return objects


def noisy_background(rng: np.random.Generator, height: int, width: int,
                     base: tuple[int, int, int] | None = None) -> np.ndarray:
    """A smooth random-colour field plus pixel noise, (H, W, 3) float32 in [0, 255]."""
    coarse = rng.uniform(70, 190, size=(4, 4, 3)).astype(np.float32)
    if base is not None:
        coarse = 0.3 * coarse + 0.7 * np.asarray(base, np.float32)
    field = cv2.resize(coarse, (width, height), interpolation=cv2.INTER_CUBIC)
    return field + rng.normal(0, 10, size=field.shape).astype(np.float32)


def draw_object(image: np.ndarray, obj: ToyObject, rng: np.random.Generator,
                colour: tuple[int, int, int] | None = None) -> None:
    """Fills ``obj`` into ``image`` (H, W, 3) float32 in place, in ``colour`` (default its shape's)
    jittered by +-25."""
    base = SHAPES[obj.name][0] if colour is None else colour
    jittered = np.clip(np.asarray(base) + rng.integers(-25, 26, size=3), 0, 255)
    pts = np.round(obj.polygon * 16).astype(np.int32)  # 4 fractional bits for sub-pixel edges
    cv2.fillPoly(image, [pts], [float(c) for c in jittered], lineType=cv2.LINE_AA, shift=4)


def object_mask(obj: ToyObject, height: int, width: int) -> np.ndarray:
    """(H, W) bool mask of the polygon's interior."""
    mask = np.zeros((height, width), np.uint8)
    cv2.fillPoly(mask, [np.round(obj.polygon * 16).astype(np.int32)], 1, lineType=cv2.LINE_8, shift=4)
    return mask.astype(bool)


def outline_band(mask: np.ndarray) -> np.ndarray:
    """(H, W) bool: the pixels within one pixel of the outline of ``mask`` (H, W) bool, inside and
    outside; the toy label maps leave this anti-aliased band unlabelled."""
    kernel = np.ones((3, 3), np.uint8)
    m = mask.astype(np.uint8)
    return cv2.dilate(m, kernel).astype(bool) & ~cv2.erode(m, kernel).astype(bool)


def finish(image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Adds sensor-like noise over everything and converts to uint8 RGB."""
    image = image + rng.normal(0, 6, size=image.shape).astype(np.float32)
    return np.clip(np.round(image), 0, 255).astype(np.uint8)
