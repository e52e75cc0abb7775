"""``DetInferencer`` and ``MMSegInferencer`` are padding-independent without any runner hook: the
InLine backbone reads each image's size from the data samples (``img_shape``) by itself.

- mmdet: a picture alone and in a batch with a larger one (padded to it by the data preprocessor)
  gives the same detections; removing the padding mask changes them (the test has teeth).
- mmseg pads no test batch to a common size (its data preprocessor refuses pictures of different
  sizes in one batch), only each picture by ``test_cfg`` (``size`` / ``size_divisor``): a picture
  padded so, with ``pad_val=114``, gives the backbone features and the segmentation it gives unpadded.
"""
import copy
from pathlib import Path

import numpy as np
import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (registers the backbones the configs build)
from helpers import load_config

pytest.importorskip('mmdet')
pytest.importorskip('mmseg')
TOY = Path(__file__).resolve().parents[2] / 'configs' / 'toy'
pytestmark = pytest.mark.usefixtures('one_thread')


def picture(path: Path, h: int, w: int, seed: int) -> str:
    """A smooth random picture (noise alone gives flat scores), written as PNG."""
    import cv2
    rng = np.random.default_rng(seed)
    coarse = rng.integers(0, 255, (h // 8 + 1, w // 8 + 1, 3)).astype(np.uint8)
    cv2.imwrite(str(path), cv2.resize(coarse, (w, h), interpolation=cv2.INTER_LINEAR))
    return str(path)


def checkpoint(config: str, tmp_path: Path):
    """The toy config's model, seeded random weights, saved as a Runner does; with its config."""
    from mmengine.registry import init_default_scope
    cfg = load_config(TOY / config)
    scope = cfg.get('default_scope', 'mmdet')
    init_default_scope(scope)
    if scope == 'mmseg':
        from mmseg.registry import DATASETS, MODELS
    else:
        from mmdet.registry import DATASETS, MODELS
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    meta = dict(dataset_meta=dict(DATASETS.get(cfg.test_dataloader.dataset.type).METAINFO))
    path = tmp_path / f'{Path(config).stem}.pth'
    torch.save(dict(meta=meta, state_dict=model.state_dict()), path)
    return str(path), cfg


def top(pred, k: int = 20):
    return np.asarray(pred['scores'][:k]), np.asarray(pred['bboxes'][:k])


def test_det_inferencer_batch_of_different_sizes(tmp_path):
    from mmdet.apis import DetInferencer

    from inline_dense.openmmlab.engine import enable_padding_mask
    weights, cfg = checkpoint('mask-rcnn_inline-swin-mini_fpn_toy-coco.py', tmp_path)
    cfg.model.test_cfg.rcnn.score_thr = 0.0  # every box: scores to compare
    cfg.model.data_preprocessor.pad_value = 114  # and padding that is not zero
    inferencer = DetInferencer(model=cfg, weights=weights, device='cpu', show_progress=False)
    small, big = picture(tmp_path / 'small.png', 90, 140, 0), picture(tmp_path / 'big.png', 150, 100, 1)
    alone = top(inferencer([small], batch_size=1)['predictions'][0])
    batched = top(inferencer([big, small], batch_size=2)['predictions'][1])
    score_err, box_err = np.abs(alone[0] - batched[0]).max(), np.abs(alone[1] - batched[1]).max()
    assert score_err < 1e-4, (score_err, box_err)
    assert box_err < 1e-2, (score_err, box_err)
    enable_padding_mask(inferencer.model).remove()  # the mask the backbone installed by itself
    unmasked = top(inferencer([big, small], batch_size=2)['predictions'][1])
    assert np.abs(alone[0] - unmasked[0]).max() > 1e-3


def test_seg_inferencer_test_padding(tmp_path):
    from mmseg.apis import MMSegInferencer

    from inline_dense.openmmlab.engine import enable_padding_mask
    weights, cfg = checkpoint('fpn_inline-pvt-mini_toy-ade.py', tmp_path)
    image = picture(tmp_path / 'image.png', 90, 140, 0)  # resized to 82 x 128
    cfg.model.data_preprocessor.pad_val = 114
    padded_cfg = copy.deepcopy(cfg)
    padded_cfg.model.data_preprocessor.test_cfg = dict(size_divisor=32)  # to 96 x 128
    features = []
    for model_cfg in (cfg, padded_cfg):
        inferencer = MMSegInferencer(model=model_cfg, weights=weights, device='cpu')
        inferencer.model.backbone.register_forward_hook(lambda m, args, out: features.append(out))
        inferencer([image])
    plain, padded = features
    assert padded[0].shape[-2] > plain[0].shape[-2]  # the test padding happened
    # (the segmentation itself differs near the border by mmseg's own doing: it resizes the logits to
    # the padded size, then crops; only the backbone is compared)

    def error(a, b):
        return max((x - y[..., :x.shape[-2], :x.shape[-1]]).abs().max().item() for x, y in zip(a, b))

    assert error(plain, padded) < 1e-4
    enable_padding_mask(inferencer.model).remove()  # the mask the backbone installed by itself
    inferencer([image])
    assert error(plain, features[-1]) > 1e-2
