"""Awkward pictures in mmdet's ``DetInferencer`` and mmseg's ``MMSegInferencer`` with the toy configs
(random weights: what matters is that a picture goes through, or fails in one line).

- a very thin picture (17 x 5000, and 5000 x 17): predicted on, results in its own size (the toy
  configs' 128-pixel Resize rounded its short side to 0 and OpenCV asserted);
- an empty or broken image file: one line naming the file and what to do (OpenCV's assertion);
- a 1 x 1 picture drawn by mmseg's visualizer: drawn (numpy took a one-element torch mask for
  the index 1).
"""
from pathlib import Path

import numpy as np
import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (the backbones and the guards)
from inline_dense.openmmlab.engine.image_guards import UnreadableImageError

ROOT = Path(__file__).resolve().parents[2]
DET = str(ROOT / 'configs' / 'toy' / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
SEG = str(ROOT / 'configs' / 'toy' / 'upernet_inline-swin-mini_toy-ade.py')


def picture(path: Path, height: int, width: int) -> str:
    import cv2
    img = np.full((height, width, 3), 110, np.uint8)
    img[:, : width // 2] = (0, 0, 230)
    cv2.imwrite(str(path), img)
    return str(path)


@pytest.fixture(scope='module')
def det():
    from mmdet.apis import DetInferencer
    torch.manual_seed(0)
    return DetInferencer(model=DET, weights=None, device='cpu', show_progress=False)


@pytest.fixture(scope='module')
def seg():
    from mmseg.apis import MMSegInferencer
    torch.manual_seed(0)
    return MMSegInferencer(model=SEG, weights=None, device='cpu')


@pytest.mark.parametrize(('height', 'width'), [(17, 5000), (5000, 17)])
def test_a_very_thin_picture_is_detected_on(det, tmp_path, one_thread, height, width):
    image = picture(tmp_path / 'thin.png', height, width)
    result = det(image, out_dir=str(tmp_path / 'out'), return_vis=True, pred_score_thr=0.0)
    assert len(result['predictions']) == 1
    assert result['visualization'][0].shape[:2] == (height, width)
    boxes = np.array(result['predictions'][0]['bboxes']).reshape(-1, 4)
    assert len(boxes)
    assert np.isfinite(boxes).all()
    assert (boxes[:, [0, 2]] <= width + 1).all()
    assert (boxes[:, [1, 3]] <= height + 1).all()


def test_a_very_thin_picture_is_segmented(seg, tmp_path, one_thread):
    image = picture(tmp_path / 'thin.png', 17, 5000)
    result = seg(image, out_dir=str(tmp_path / 'out'), return_vis=True)
    assert result['predictions'].shape == (17, 5000)
    assert result['visualization'].shape[:2] == (17, 5000)


def test_a_one_pixel_picture_is_drawn_by_mmsegs_visualizer(seg, tmp_path, one_thread):
    image = picture(tmp_path / 'one.png', 1, 1)
    result = seg(image, out_dir=str(tmp_path / 'out'), return_vis=True)
    assert result['predictions'].shape == (1, 1)
    assert result['visualization'].shape == (1, 1, 3)
    assert (tmp_path / 'out' / 'vis' / 'one.png').is_file()


@pytest.mark.parametrize(('content', 'words'), [(b'', 'is empty (0 bytes)'),
                                            (b'\xff\xd8\xff\xe0 not really a jpeg', 'holds 22 bytes')])
def test_an_unreadable_image_file_is_one_line(det, seg, tmp_path, content, words):
    path = tmp_path / 'broken.jpg'
    path.write_bytes(content)
    for inferencer in (det, seg):
        with pytest.raises(UnreadableImageError) as info:
            inferencer(str(path), out_dir=str(tmp_path / 'out'))
        text = str(info.value)
        assert '\n' not in text
        assert str(path) in text
        assert words in text
        assert 'save the picture again' in text


def test_other_loading_failures_keep_their_own_error(tmp_path):
    """A picture that decodes is never reported as unreadable: the original error stays."""
    from mmcv.transforms import LoadImageFromFile
    image = picture(tmp_path / 'fine.png', 8, 8)
    loader = LoadImageFromFile(color_type='no-such-flag')
    with pytest.raises(Exception) as info:  # noqa: PT011 (whatever mmcv raises, as long as it is not ours)
        loader.transform(dict(img_path=image))
    assert not isinstance(info.value, UnreadableImageError)
