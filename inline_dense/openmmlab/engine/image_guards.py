"""Three pictures that stock mmcv / mmdet / mmseg code cannot take, handled where they fail.

Each guard changes behaviour only where the stock code would raise an unreadable error; every
other call runs the original unchanged. :func:`install` (``import inline_dense`` calls it) puts
them in place; it is idempotent.

- **A very thin picture** (17 x 5000 with the toy configs' 128-pixel scale): ``Resize`` with
  ``keep_ratio`` rounds the short side to 0 and OpenCV asserts ``inv_scale_x > 0``. Now that side
  is 1 pixel: the picture is predicted on like any other (boxes and masks map back through the
  real resize factors, which mmdet and mmseg take from the resized image's shape).
- **An empty or undecodable image file**: OpenCV asserts ``!buf.empty()`` (empty) or mmcv
  asserts ``failed to load image``. Now: a one-line :class:`UnreadableImageError` naming the file,
  its size and what to do.
- **A 1 x 1 picture in mmseg's visualizer** (``MMSegInferencer`` with ``out_dir``,
  ``return_vis`` or ``show``): its mask drawing indexes a numpy array with a one-element torch
  mask, which numpy reads as the index 1 (``IndexError: index 1 is out of bounds``). Now a
  one-pixel class map is handed over as a numpy array, and the picture is drawn.
"""
import functools
import os
import sys
from collections.abc import Callable

GUARDED = '_inline_dense_guard'


class UnreadableImageError(ValueError):
    """An image file that holds no picture OpenCV / Pillow can decode."""


def _mark(func: Callable) -> Callable:
    setattr(func, GUARDED, True)
    return func


def _at_least_one_pixel(rescale_size: Callable) -> Callable:
    @functools.wraps(rescale_size)
    def guarded(old_size, scale, return_scale=False):
        result = rescale_size(old_size, scale, return_scale)
        size = result[0] if return_scale else result
        if min(size) >= 1:
            return result
        size = tuple(max(int(side), 1) for side in size)
        return (size, result[1]) if return_scale else size
    return _mark(guarded)


def _readable_image(transform: Callable) -> Callable:
    @functools.wraps(transform)
    def guarded(self, results: dict):
        try:
            out = transform(self, results)
        except Exception as exc:  # OpenCV's cv2.error, mmcv's AssertionError, Pillow's errors
            problem = _unreadable(results.get('img_path'), exc)
            if problem is exc:
                raise
            raise problem from exc
        return out
    return _mark(guarded)


def _decodes(path: str) -> bool:
    import mmcv
    try:
        with open(path, 'rb') as f:
            return mmcv.imfrombytes(f.read()) is not None
    except Exception:  # OpenCV's cv2.error on an empty buffer, Pillow's errors
        return False


def _unreadable(path, exc: Exception) -> Exception:
    """A one-line :class:`UnreadableImageError` when ``path`` holds no decodable picture; otherwise
    the original error (the failure was something else)."""
    if not isinstance(path, str) or not os.path.isfile(path) or _decodes(path):
        return exc
    size = os.path.getsize(path)
    if size == 0:
        what = 'is empty (0 bytes)'
    else:
        cause = (str(exc).strip().splitlines() or [''])[-1][:160]
        what = f'holds {size} bytes that OpenCV cannot decode as a picture ({type(exc).__name__}: {cause})'
    return UnreadableImageError(f'image file {path} {what}; save the picture again as JPEG or PNG, or leave the '
                                f'file out')


def _one_pixel_masks(draw_sem_seg: Callable) -> Callable:
    @functools.wraps(draw_sem_seg)
    def guarded(self, image, sem_seg, *args, **kwargs):
        data = getattr(sem_seg, 'data', None)
        if data is not None and hasattr(data, 'numpy') and data.numel() == 1:
            sem_seg = sem_seg.clone()
            sem_seg.data = data.cpu().numpy()  # numpy reads a one-element torch mask as an integer index
        return draw_sem_seg(self, image, sem_seg, *args, **kwargs)
    return _mark(guarded)


def _wrap(owner, name: str, guard: Callable[[Callable], Callable]) -> None:
    original = getattr(owner, name, None)
    if original is not None and not getattr(original, GUARDED, False):
        setattr(owner, name, guard(original))


def install() -> None:
    """Puts the guards in place (mmcv's and mmseg's; mmdet's where already imported)."""
    import mmcv.image.geometric as mmcv_geometric
    from mmcv.transforms import loading
    _wrap(mmcv_geometric, 'rescale_size', _at_least_one_pixel)
    _wrap(loading.LoadImageFromFile, 'transform', _readable_image)
    # mmdet's own copy serves only FixScaleResize (Resize uses mmcv's); importing mmdet.datasets
    # for it would double the import time of inline_dense, so it is guarded when already imported.
    mmdet_transforms = sys.modules.get('mmdet.datasets.transforms.transforms')
    if mmdet_transforms is not None:
        _wrap(mmdet_transforms, 'rescale_size', _at_least_one_pixel)
    try:
        from mmseg.visualization import SegLocalVisualizer
    except ImportError:
        return
    _wrap(SegLocalVisualizer, '_draw_sem_seg', _one_pixel_masks)
