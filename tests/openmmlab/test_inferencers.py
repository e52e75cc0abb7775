"""Running a trained model on your own pictures: mmdet's ``DetInferencer`` and mmseg's
``MMSegInferencer`` with the configs here.

The inferencer plumbing (test pipeline, dataset meta, the head's results, the files written) is
the same for every config of one codebase and head family, so one config each is run:

- a toy config per codebase: a checkpoint written by ``tools/train.py`` (one iteration on a tiny
  toy set), then the inferencer on a toy picture and on a picture of another size (PNG), writing
  the visualisation and the prediction files;
- a COCO / ADE20K config per head family (Mask R-CNN, Cascade Mask R-CNN, RetinaNet, UperNet,
  Semantic FPN; the three backbone families among them): the model the config builds, with fewer
  blocks per stage, saved in the Runner's checkpoint layout (``state_dict`` +
  ``meta.dataset_meta``; training needs the real data), then the inferencer on a picture.

Every config's model is built and predicts in ``test_configs.test_builds_and_predicts``; every
config merges to its recorded settings in ``test_config_snapshot``; every toy config trains,
resumes and tests in ``test_toy_e2e``.
"""
import functools
from pathlib import Path

import numpy as np
import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (registers the backbones the configs build)
from helpers import load_config, shrink_backbone

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / 'configs'
TOY_CONFIGS = [CONFIGS / 'toy' / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py',
               CONFIGS / 'toy' / 'upernet_inline-swin-mini_toy-ade.py']
REAL_CONFIGS = [
    CONFIGS / 'mask_rcnn' / 'mask-rcnn_inline-pvt-t_fpn_1x_coco.py',
    CONFIGS / 'cascade_rcnn' / 'cascade-mask-rcnn_inline-cswin-t_fpn_ms-crop-3x_coco.py',
    CONFIGS / 'retinanet' / 'retinanet_inline-swin-t_fpn_1x_coco.py',
    CONFIGS / 'upernet' / 'upernet_inline-cswin-t_8xb2-160k_ade20k-512x512.py',
    CONFIGS / 'sem_fpn' / 'fpn_inline-pvt-t_4xb4-80k_ade20k-512x512.py',
]
pytestmark = pytest.mark.usefixtures('one_thread')


def quick_options(max_iters: int) -> list[str]:
    opts = [f'train_cfg.max_iters={max_iters}', 'val_cfg=None', 'val_dataloader=None', 'val_evaluator=None',
            'train_dataloader.batch_size=2', 'default_hooks.checkpoint.interval=1', 'randomness.seed=0']
    return opts + [f'{d}.{k}' for d in ('train_dataloader', 'test_dataloader')
                   for k in ('num_workers=0', 'persistent_workers=False')]


@functools.cache
def task_of(config: Path) -> str:
    return load_config(config).get('default_scope', 'mmdet')


def own_picture(path: Path, height: int = 90, width: int = 140) -> str:
    """A picture of a size the model never saw: a red disc and a green square on grey, as PNG."""
    import cv2
    img = np.full((height, width, 3), 110, np.uint8)
    cv2.circle(img, (40, 45), 22, (0, 0, 230), -1)  # BGR
    cv2.rectangle(img, (80, 20), (125, 65), (0, 200, 0), -1)
    cv2.imwrite(str(path), img)
    return str(path)


def run_inferencer(config: Path, weights: str, images: list[str], out_dir: Path, model_cfg=None) -> list:
    """Runs the task's inferencer (on ``model_cfg`` if given, else the config file); checks its
    predictions and the files it writes."""
    model = model_cfg if model_cfg is not None else str(config)
    if task_of(config) == 'mmseg':
        from mmseg.apis import MMSegInferencer
        inferencer = MMSegInferencer(model=model, weights=weights, device='cpu')
    else:
        from mmdet.apis import DetInferencer
        inferencer = DetInferencer(model=model, weights=weights, device='cpu', show_progress=False)
    results = inferencer(images, out_dir=str(out_dir), return_vis=True)
    predictions, visualization = results['predictions'], results['visualization']
    if len(images) == 1 and task_of(config) == 'mmseg':  # MMSegInferencer unwraps a single result
        predictions, visualization = [predictions], [visualization]
    assert len(predictions) == len(images)
    assert len(visualization) == len(images)
    import cv2
    for image, pred, vis in zip(images, predictions, visualization):
        height, width = cv2.imread(image).shape[:2]
        assert vis.shape[:2] == (height, width)
        if task_of(config) == 'mmseg':
            mask = np.asarray(pred)
            assert mask.shape == (height, width)
        else:
            assert {'labels', 'scores', 'bboxes'} <= set(pred)
            assert len(pred['labels']) == len(pred['scores']) == len(pred['bboxes'])
    written = sorted(p.name for p in (out_dir / 'vis').iterdir())
    assert written == sorted(Path(i).name for i in images), written
    return predictions


@pytest.mark.slow
@pytest.mark.parametrize('config', TOY_CONFIGS, ids=lambda p: p.name)
def test_toy_config_with_a_train_py_checkpoint(config, toy_dir, tmp_path, monkeypatch, load_tool):
    monkeypatch.chdir(toy_dir)
    work = tmp_path / 'work'
    load_tool('train').main([str(config), '--work-dir', str(work), '--cfg-options', *quick_options(1)])
    weights = work / 'iter_1.pth'
    assert weights.is_file()
    sub = 'toy_ade/images/validation' if task_of(config) == 'mmseg' else 'toy_coco/val2017'
    toy_image = str(sorted((toy_dir / 'data' / sub).glob('*.jpg'))[0])
    images = [toy_image, own_picture(tmp_path / 'my_picture.png')]
    run_inferencer(config, str(weights), images, tmp_path / 'out')


@pytest.mark.slow
@pytest.mark.parametrize('config', REAL_CONFIGS, ids=lambda p: p.name)
def test_config_with_a_runner_layout_checkpoint(config, tmp_path):
    from mmengine.registry import init_default_scope
    cfg = shrink_backbone(load_config(config))
    scope = cfg.get('default_scope', 'mmdet')
    init_default_scope(scope)
    if scope == 'mmseg':
        from mmseg.registry import DATASETS, MODELS
    else:
        from mmdet.registry import DATASETS, MODELS
    model = MODELS.build(cfg.model)  # no init_weights: the pretrained backbone is not needed here
    dataset_cls = DATASETS.get(cfg.test_dataloader.dataset.type)
    meta = {'dataset_meta': dict(dataset_cls.METAINFO), 'experiment_name': config.stem}
    weights = tmp_path / 'iter_1.pth'
    torch.save({'meta': meta, 'state_dict': model.state_dict()}, weights)
    del model
    run_inferencer(config, str(weights), [own_picture(tmp_path / 'my_picture.png', 120, 160)], tmp_path / 'out',
                   model_cfg=cfg)


@pytest.mark.slow
@pytest.mark.parametrize('config', ['fpn_inline-pvt-mini_toy-ade.py', 'retinanet_inline-pvt-mini_fpn_toy-coco.py'])
def test_a_6000x200_picture_through_the_inferencers(config, tmp_path):
    """Resized to 128 on its long side, the picture is 4 pixels high: below the total stride."""
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    path = ROOT / 'configs' / 'toy' / config
    cfg = Config.fromfile(str(path))
    init_default_scope(cfg.default_scope)
    if cfg.default_scope == 'mmseg':
        from mmseg.registry import DATASETS, MODELS
    else:
        from mmdet.registry import DATASETS, MODELS
    import inline_dense.openmmlab.toy_datasets  # noqa: F401  (the toy datasets' meta)
    meta = {'dataset_meta': dict(DATASETS.get(cfg.test_dataloader.dataset.type).METAINFO)}
    weights = tmp_path / 'model.pth'
    torch.save({'meta': meta, 'state_dict': MODELS.build(cfg.model).state_dict()}, weights)
    run_inferencer(path, str(weights), [own_picture(tmp_path / 'long.png', 200, 6000)], tmp_path / 'out')
