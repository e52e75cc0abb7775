"""Evaluate a trained detector or segmentor with the config's test_evaluator (COCO AP, mIoU, ...).

    python tools/test.py CONFIG CHECKPOINT [--work-dir DIR] [--out preds.pkl] [--show-dir DIR]
                         [--allow-partial-load] [--amp] [--compile [static]] [--cfg-options k=v ...]
                         [--launcher {none,pytorch,slurm,mpi}]

A checkpoint that does not fit the config's model (another model's or dataset's) is refused,
naming the missing / unexpected weights, unless --allow-partial-load. --amp evaluates under autocast
(bfloat16 on a CPU with native bf16, float16 on GPU; float32, said in one line, on a CPU without it);
the metrics get float32 predictions. --compile runs the backbone, neck and decode head compiled
(torch.compile, inductor with freezing, dynamic sizes; inline_dense.runtime.compiling); --compile static
compiles a graph per input size instead (faster where every image pads to one size); it composes with
--amp. On the CPU the tool keeps freed memory in the process (inline_dense.runtime.allocator).
"""
import argparse
import os.path as osp

import inline_dense.openmmlab  # noqa: F401  (the mmcv ops, the backbones, hooks and inline:// for mmengine)
from inline_dense.checkpoint import CheckpointError
from inline_dense.checkpoint.atomic import OutputPathError, output_target
from inline_dense.openmmlab.engine import launch
from inline_dense.openmmlab.engine.checkpoint_fit import check_readable
from inline_dense.openmmlab.engine.dataset_checks import DatasetCheckError, check_dataset_and_heads
from inline_dense.openmmlab.engine.mmengine_compat import UnsupportedMmengine
from inline_dense.openmmlab.engine.tool_inputs import ToolInputError, check_work_dir

USER_ERRORS = (CheckpointError, DatasetCheckError, launch.MissingDatasetError, ToolInputError,
               UnsupportedMmengine)


def parse_args(argv=None) -> argparse.Namespace:
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description='Test (and evaluate) an MMDetection or MMSegmentation model')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='where the metrics (json) and logs go')
    parser.add_argument('--out', help='dump the raw predictions to this .pkl file')
    parser.add_argument('--show-dir', help='save pictures of the predictions here '
                                           '(relative paths: under WORK_DIR/<timestamp>/)')
    parser.add_argument('--allow-partial-load', action='store_true',
                        help='load the weights that fit and test anyway (default: refuse a checkpoint that does '
                             'not fit the model, naming the missing / unexpected weights)')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision (float16 on GPU; bfloat16 on CPU, float32 on a CPU '
                             'without native bfloat16)')
    parser.add_argument('--compile', nargs='?', const='dynamic', default=None, choices=['dynamic', 'static'],
                        help='run the backbone, neck and decode head compiled (torch.compile, inductor with freezing; '
                             'the first batch compiles, a minute or more); without a C++ compiler: eager, said '
                             'in one line. "--compile static": a graph per input size, faster where every image '
                             'pads to one size (Cityscapes); plain --compile: one graph for all sizes')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher (pytorch = torchrun; see tools/dist_test.sh)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    launch.set_local_rank(args.local_rank)
    if args.out is not None and not args.out.endswith(('.pkl', '.pickle')):
        parser.error(f'--out {args.out}: the predictions are dumped with pickle; use a .pkl file name')
    try:  # refused now, not after the whole test set ran
        if args.out is not None:
            output_target(args.out)
    except OutputPathError as exc:
        parser.error(f'--out: {exc}')
    if args.show_dir is not None and osp.exists(args.show_dir) and not osp.isdir(args.show_dir):
        parser.error(f'--show-dir {args.show_dir} exists and is not a directory; name a directory for the '
                     f'pictures (it is created if missing)')
    return args


def draw_predictions(cfg, codebase: str, show_dir: str) -> None:
    """Turns on the visualization hook so every test image is drawn into ``show_dir``."""
    hook = cfg.get('default_hooks', {}).get('visualization')
    if hook is None:
        raise ValueError('--show-dir needs default_hooks.visualization in the config (DetVisualizationHook '
                         'for mmdet, SegVisualizationHook for mmseg); the packages\' default_runtime.py has it.')
    hook['draw'] = True
    if codebase == 'mmdet':
        hook['test_out_dir'] = show_dir
    else:
        hook['interval'] = 1  # every test image (SegVisualizationHook draws every 50th by default)
        cfg.visualizer['save_dir'] = show_dir


def add_dump(runner, codebase: str, out: str) -> None:
    if codebase == 'mmdet':
        from mmdet.evaluation import DumpDetResults as Dump
    else:
        from mmengine.evaluator import DumpResults as Dump
    runner.test_evaluator.metrics.append(Dump(out_file_path=out))


def enable_amp(cfg) -> None:
    """The test loop under autocast in the dtype ``amp_dtype`` picks for this machine (none: float32)."""
    from mmengine.device import get_device

    from inline_dense.openmmlab.engine.amp import enable_amp_eval
    from inline_dense.runtime.precision import amp_dtype
    dtype = amp_dtype(get_device())
    if dtype is not None:
        enable_amp_eval(cfg, dtype)


def main(argv=None) -> dict:
    args = parse_args(argv)
    cfg = launch.load_config(args.config, args.cfg_options)
    codebase = launch.setup_codebase(cfg)
    cfg.launcher = args.launcher
    launch.default_work_dir(cfg, args.config, args.work_dir)
    check_work_dir(cfg.work_dir)
    if not osp.isfile(args.checkpoint):
        raise FileNotFoundError(f'checkpoint {args.checkpoint} does not exist; pass the .pth written by '
                                f'tools/train.py (e.g. WORK_DIR/iter_N.pth or the path in WORK_DIR/last_checkpoint)')
    cfg.load_from = args.checkpoint
    cfg.custom_hooks = [*(cfg.get('custom_hooks') or []),
                        dict(type='CheckpointFitHook', allow_partial=args.allow_partial_load, source=args.checkpoint)]
    launch.check_datasets(cfg, ('test_dataloader',))
    check_dataset_and_heads(cfg, ('test_dataloader',))
    check_readable(args.checkpoint)  # a cut file: one line here, not torch's traceback from the Runner
    if args.show_dir:
        draw_predictions(cfg, codebase, args.show_dir)
    if args.amp:
        enable_amp(cfg)
    if args.compile:
        cfg.custom_hooks = [*(cfg.get('custom_hooks') or []), dict(type='InferenceCompileHook', sizes=args.compile)]
    launch.adapt_to_cpu(cfg)
    from mmengine.device import get_device

    from inline_dense.runtime.allocator import tool_default
    tool_default(get_device())
    with launch.loader_workers_ended(launch.build_runner(cfg)) as runner:
        if args.out:
            add_dump(runner, codebase, args.out)
        return runner.test()


if __name__ == '__main__':
    launch.run_tool(main, USER_ERRORS)
