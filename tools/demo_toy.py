"""The main job: train a toy InLine detector on CPU, evaluate it with COCO AP, draw its predictions.

    python tools/demo_toy.py                     # toy Mask R-CNN + InLine-Swin, a few minutes on CPU
    python tools/demo_toy.py --config configs/toy/retinanet_inline-pvt-mini_fpn_toy-coco.py
    python tools/demo_toy.py --amp               # train and evaluate in bfloat16 (CPU with native bf16)
    python tools/demo_toy.py --checkpoint work_dirs/demo_toy/iter_400.pth --amp   # those weights, bf16 eval
    python tools/demo_toy.py --checkpoint work_dirs/demo_toy/iter_400.pth --compile   # evaluated compiled

Steps: generate data/toy_coco if missing -> train from scratch -> evaluate on the toy val set
(pycocotools box AP, and mask AP for Mask R-CNN) -> write GT | prediction pictures of a few val
images to WORK_DIR/predictions.png. The checkpoint is WORK_DIR/iter_<N>.pth; ``--checkpoint`` evaluates
and draws it again without training (with ``--amp``: the same weights evaluated in bfloat16), as does
    python tools/test.py CONFIG WORK_DIR/iter_<N>.pth
"""
import argparse
import logging
import os.path as osp
import time

import inline_dense.openmmlab  # noqa: F401  (the mmcv ops, the backbones, hooks and inline:// for mmengine)
from inline_dense.checkpoint import CheckpointError
from inline_dense.checkpoint.atomic import OutputPathError, output_target, write_output
from inline_dense.openmmlab.engine.checkpoint_fit import check_readable
from inline_dense.openmmlab.engine.launch import (
    REPO_ROOT,
    build_runner,
    load_config,
    loader_workers_ended,
    run_tool,
    setup_codebase,
)
from inline_dense.openmmlab.engine.tool_inputs import ToolInputError

DEFAULT_CONFIG = osp.join(REPO_ROOT, 'configs', 'toy', 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')


def parse_args(argv=None) -> argparse.Namespace:
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description='Train, evaluate and visualise a toy InLine detector on CPU')
    parser.add_argument('--config', default=DEFAULT_CONFIG, help='a configs/toy/*toy-coco.py config')
    parser.add_argument('--work-dir', default='work_dirs/demo_toy', help='logs, checkpoint and picture')
    parser.add_argument('--max-iters', type=int, help="training iterations (default: the config's)")
    parser.add_argument('--num-pictures', type=int, default=4, help='val images drawn in the picture')
    parser.add_argument('--score-thr', type=float, default=None,
                        help="draw the predictions above this score (default: each image's top N, N = its "
                             "number of ground-truth objects, whatever the head's score scale: DINO's scores "
                             "after a short run are mostly below 0.5, Mask R-CNN's above)")
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=1,
                        help='torch CPU threads (1: the toy tensors are small, and several threads that '
                             'share busy cores wait on each other, which can be 10x slower)')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision, training and evaluation (float16 on GPU; bfloat16 on CPU, '
                             'float32 on a CPU without native bfloat16)')
    parser.add_argument('--checkpoint', default=None,
                        help='no training: evaluate and draw these weights (a WORK_DIR/iter_<N>.pth of an earlier '
                             'run); with --amp the evaluation only runs under autocast')
    parser.add_argument('--compile', action='store_true',
                        help='evaluate with the backbone and neck compiled (torch.compile, inductor with freezing; '
                             'training stays eager); without a C++ compiler: eager, said in one line')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction, help='override config settings, key=value')
    return parser.parse_args(argv)


def upscale_sample(sample, factor: int):
    """A copy of a DetDataSample with boxes and masks ``factor`` times the original image's size.

    Predictions are in original image pixels, and so is the ground truth: mmdet's test
    pipelines load the annotations after resizing the image.
    """
    import torch.nn.functional as F
    from mmdet.structures.mask import BitmapMasks, PolygonMasks

    sample = sample.clone()
    for key in ('gt_instances', 'pred_instances'):
        if key not in sample:
            continue
        inst = getattr(sample, key)
        inst.bboxes = inst.bboxes * factor
        if 'masks' in inst:
            masks = inst.masks
            if isinstance(masks, (BitmapMasks, PolygonMasks)):
                inst.masks = masks.rescale(factor)
            elif len(masks):
                inst.masks = F.interpolate(masks[:, None].float(), scale_factor=factor, mode='nearest')[:, 0] > 0.5
            else:
                h, w = masks.shape[-2:]
                inst.masks = masks.new_zeros((0, h * factor, w * factor))
    return sample


def picture_predictions(sample, score_thr: float | None):
    """The sample with only the predictions the picture draws: those scoring above ``score_thr``, or
    (None) the top N by score, N = the image's number of ground-truth objects, as AP ranks them."""
    pred = sample.pred_instances
    if score_thr is not None:
        keep = pred.scores > score_thr
    else:
        keep = pred.scores.argsort(descending=True)[:len(sample.gt_instances)]
    sample = sample.clone()
    sample.pred_instances = pred[keep]
    return sample


def draw_predictions(runner, out_file: str, num: int, score_thr: float | None, factor: int = 3) -> None:
    """Runs the trained model on the first ``num`` test images and writes rows of GT | prediction."""
    import cv2
    import mmcv
    import numpy as np
    import torch

    model = getattr(runner.model, 'module', runner.model)
    model.eval()
    visualizer = runner.visualizer
    visualizer.dataset_meta = runner.test_dataloader.dataset.metainfo
    rows: list[np.ndarray] = []
    with torch.no_grad():
        for i, batch in enumerate(runner.test_dataloader):
            if i >= num:
                break
            for sample in model.test_step(batch):
                image = mmcv.imread(sample.img_path, channel_order='rgb')
                image = mmcv.imrescale(image, factor, interpolation='nearest')
                shown = upscale_sample(picture_predictions(sample, score_thr), factor)
                visualizer.add_datasample(osp.basename(sample.img_path), image, shown, draw_gt=True, draw_pred=True,
                                          pred_score_thr=float('-inf'), show=False)
                rows.append(visualizer.get_image())
    _, png = cv2.imencode('.png', np.ascontiguousarray(np.concatenate(rows, 0)[:, :, ::-1]))  # RGB -> BGR
    write_output(out_file, png.tobytes())


def fit_schedule(cfg, max_iters: int) -> None:
    """``max_iters`` training iterations, the LR schedule stretched to match, one evaluation after."""
    old = cfg.train_cfg.max_iters
    cfg.train_cfg.max_iters = max_iters
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None  # evaluated once, after training
    for sched in cfg.param_scheduler:
        for key in ('begin', 'end'):
            if key in sched:
                sched[key] = round(sched[key] * max_iters / old)
        sched['end'] = max(sched['end'], sched.get('begin', 0) + 1)
    cfg.default_hooks.checkpoint.interval = max_iters


def enable_amp(cfg):
    """Training and evaluation under autocast in the dtype ``amp_dtype`` picks (None: float32 stays)."""
    from mmengine.device import get_device

    from inline_dense.openmmlab.engine.amp import enable_amp_eval, enable_amp_training
    from inline_dense.runtime.precision import amp_dtype
    dtype = amp_dtype(get_device())
    if dtype is not None:
        enable_amp_training(cfg, dtype, get_device())
        enable_amp_eval(cfg, dtype)
    return dtype


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.checkpoint is not None:
        if not osp.isfile(args.checkpoint):
            raise ToolInputError(f'--checkpoint {args.checkpoint}: no such file; give the iter_<N>.pth an earlier '
                                 f'demo run wrote in its work dir')
        check_readable(args.checkpoint)
    t0 = time.time()
    import torch

    from inline_dense.runtime.allocator import tool_default
    torch.set_num_threads(max(args.threads, 1))
    tool_default('cpu')  # the demo runs on the CPU
    cfg = load_config(args.config, args.cfg_options)
    codebase = setup_codebase(cfg)
    if codebase != 'mmdet':
        raise ToolInputError(f'--config {args.config} is an {codebase} config; the demo trains and scores a detector: '
                             f'give a configs/toy/*toy-coco.py config (a segmentor: tools/train.py and tools/test.py)')
    max_iters = args.max_iters or cfg.train_cfg.max_iters
    fit_schedule(cfg, max_iters)
    cfg.work_dir = args.work_dir
    picture = osp.join(args.work_dir, 'predictions.png')
    output_target(picture)  # a directory, device or FIFO there is refused now, not after training
    cfg.randomness = dict(seed=args.seed)
    amp = enable_amp(cfg) if args.amp else None
    if args.compile:
        cfg.custom_hooks = [*(cfg.get('custom_hooks') or []), dict(type='InferenceCompileHook')]
    if args.checkpoint is not None:
        cfg.load_from = args.checkpoint  # Runner.test() loads it, non-strictly: the fit check refuses what does not fit
        cfg.custom_hooks = [*(cfg.get('custom_hooks') or []), dict(
            type='CheckpointFitHook', source=args.checkpoint,
            fix=f'Pass the iter_<N>.pth a demo run of --config {osp.basename(args.config)} wrote (or run it '
                f'without --checkpoint to train one).')]

    from inline_dense.toy_data import make_toy_coco
    data_cfg = cfg.train_dataloader.dataset
    existed = osp.isdir(data_cfg.data_root)
    root = make_toy_coco(data_cfg.data_root, **(data_cfg.get('toy_data') or {}))
    print(f'[demo] toy COCO data: {root} ({"existing" if existed else "generated"})', flush=True)

    cfg.log_level = 'WARNING'  # no dump of the environment and the whole config ...
    runner = build_runner(cfg)
    for logger in (runner.logger, *runner.logger.handlers):  # ... but the training progress
        logger.setLevel(logging.INFO)
    for handler in runner.logger.handlers:  # and not one line per parameter without weight decay
        handler.addFilter(lambda record: not record.getMessage().startswith('paramwise_options'))
    precision = '' if amp is None else f' in {amp} autocast'
    with loader_workers_ended(runner):  # also when training or scoring stops on an error
        t_train = 0.0
        if args.checkpoint is None:
            print(f'[demo] training {osp.basename(args.config)} from scratch on CPU for {max_iters} iterations'
                  f'{precision}', flush=True)
            t1 = time.time()
            runner.train()
            t_train = time.time() - t1
        else:
            print(f'[demo] evaluating {args.checkpoint} (no training){precision}', flush=True)
        t1 = time.time()
        metrics = runner.test()
        t_eval = time.time() - t1
        draw_predictions(runner, picture, args.num_pictures, args.score_thr)

    print('\n[demo] ===== results on the toy COCO val set (pycocotools) =====')
    for key, name in (('coco/bbox_mAP', 'box AP'), ('coco/bbox_mAP_50', 'box AP50'),
                      ('coco/segm_mAP', 'mask AP'), ('coco/segm_mAP_50', 'mask AP50')):
        if key in metrics:
            print(f'[demo] {name:>9}: {metrics[key]:.3f}')
    print('[demo] (a detector guessing at random scores about 0.00)')
    trained = f'train {t_train:.0f} s, ' if args.checkpoint is None else ''
    print(f'[demo] {trained}eval {t_eval:.0f} s, total {time.time() - t0:.0f} s '
          f'(torch threads: {torch.get_num_threads()})')
    print(f'[demo] checkpoint: {args.checkpoint or osp.join(args.work_dir, f"iter_{max_iters}.pth")}')
    shown = (f'score > {args.score_thr}' if args.score_thr is not None
             else "each image's top N by score, N = its number of objects")
    print(f'[demo] picture (left ground truth, right predictions: {shown}): {picture}')
    return metrics


if __name__ == '__main__':
    run_tool(main, (CheckpointError, OutputPathError, ToolInputError))  # one line each, no traceback
