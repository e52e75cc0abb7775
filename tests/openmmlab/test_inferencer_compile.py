"""The documented recipe for the compiled path in mmdet's ``DetInferencer`` and mmseg's ``MMSegInferencer``
(docs/deploy.md): ``compile_for_inference(inferencer.model)`` after the inferencer is built. Pictures of two
sizes (the test pipeline resizes and pads them differently) give the eager predictions, through one graph
per compiled part (dynamo's counters; the 'eager' backend keeps the test quick: the graphs and their guards
are dynamo's, the kernels inductor's, checked in tests/runtime/test_compiling.py)."""
import io
from pathlib import Path

import numpy as np
import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (registers the backbones the configs build)
from helpers import load_config
from inline_dense.runtime.compiling import compile_for_inference, parts_to_compile

CONFIGS = Path(__file__).resolve().parents[2] / 'configs' / 'toy'
pytestmark = pytest.mark.usefixtures('one_thread')


def picture(path: Path, height: int, width: int) -> str:
    import cv2
    rng = np.random.default_rng(height * width)
    cv2.imwrite(str(path), rng.integers(0, 255, (height, width, 3), dtype=np.uint8))
    return str(path)


def inferencer_for(config: Path, tmp_path: Path):
    from mmengine.registry import init_default_scope
    cfg = load_config(config)
    scope = cfg.get('default_scope', 'mmdet')
    init_default_scope(scope)
    if scope == 'mmseg':
        from mmseg.registry import DATASETS, MODELS
    else:
        from mmdet.registry import DATASETS, MODELS
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    meta = {'dataset_meta': dict(DATASETS.get(cfg.test_dataloader.dataset.type).METAINFO)}
    weights = tmp_path / 'weights.pth'
    torch.save({'meta': meta, 'state_dict': model.state_dict()}, weights)
    if scope == 'mmseg':
        from mmseg.apis import MMSegInferencer
        return MMSegInferencer(model=cfg, weights=str(weights), device='cpu'), scope
    from mmdet.apis import DetInferencer
    return DetInferencer(model=cfg, weights=str(weights), device='cpu', show_progress=False), scope


def outputs(inferencer, scope, images):
    preds = inferencer(images)['predictions']
    if scope == 'mmseg':
        return [np.asarray(p, dtype=np.float64) for p in preds]
    return [np.asarray(p['scores'], dtype=np.float64)[:20] for p in preds]


@pytest.mark.slow
@pytest.mark.parametrize('config', ['mask-rcnn_inline-swin-mini_fpn_toy-coco.py',
                                    'upernet_inline-swin-mini_toy-ade.py'])
def test_compiled_inferencer_matches_eager_with_one_graph_per_part(config, tmp_path):
    from torch._dynamo.utils import counters
    inferencer, scope = inferencer_for(CONFIGS / config, tmp_path)
    images = [picture(tmp_path / 'a.png', 90, 140), picture(tmp_path / 'b.png', 130, 100)]
    eager = outputs(inferencer, scope, images)
    torch._dynamo.reset()
    counters.clear()
    try:
        assert compile_for_inference(inferencer.model, backend='eager', stream=io.StringIO())
        compiled = outputs(inferencer, scope, images)
        parts = len(parts_to_compile(inferencer.model))
        assert counters['stats']['unique_graphs'] == parts, (counters['stats'], parts)
    finally:
        torch._dynamo.reset()
    for a, b in zip(compiled, eager):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, atol=1e-4)
