"""Train a detector (MMDetection) or a segmentor (MMSegmentation) from any inline_dense config.

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp]
                          [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]

Whether the config is a detection or a segmentation one is read from its default_scope
('mmdet' / 'mmseg', set by either package's default_runtime.py) or its model type.
"""
import argparse
import os.path as osp

from inline_dense.engine.launch import (adapt_to_cpu, build_runner, default_work_dir, load_config,
                     set_local_rank, setup_codebase)


def parse_args(argv=None) -> argparse.Namespace:
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description='Train an MMDetection or MMSegmentation model')
    parser.add_argument('config', help='config file')
    parser.add_argument('--work-dir', help='where logs and checkpoints go (default work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', type=str, const='auto',
                        help='resume from a checkpoint path; alone: from the latest checkpoint in the work dir')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision (float16 on GPU; bfloat16 on CPU)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by (total batch size / auto_scale_lr.base_batch_size)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value (e.g. train_cfg.max_iters=100 '
                             'model.backbone.drop_path_rate=0.2); lists as key="[a,b]"')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher (pytorch = torchrun; see tools/dist_train.sh)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    set_local_rank(args.local_rank)
    return args


def enable_amp(cfg) -> None:
    """AmpOptimWrapper: float16 with a dynamic loss scale on GPUs, bfloat16 (no scaling) on CPU.

    A dtype already set in the config's optim_wrapper is kept.
    """
    from mmengine.device import get_device
    wrapper = cfg.optim_wrapper
    device = get_device()
    dtype = wrapper.get('dtype') or ('bfloat16' if device == 'cpu' else 'float16')
    if device == 'cpu':
        if dtype == 'float16':
            raise ValueError('--amp with optim_wrapper.dtype=float16 needs a GPU: torch has no float16 '
                             'autocast on CPU. Leave dtype unset (bfloat16 is used on CPU) or drop --amp.')
        model = cfg.get('model') or {}
        if model.get('rpn_head') or model.get('roi_head'):
            raise ValueError(f'--amp on CPU: {model.get("type")} proposes boxes with mmcv\'s NMS / RoIAlign, whose CPU '
                             f'kernels have no bfloat16 version. On CPU, --amp works for one-stage detectors '
                             f'(RetinaNet) and the segmentors; train this model without --amp, or with --amp on a GPU.')
        wrapper.type = 'CpuAmpOptimWrapper'
    else:
        wrapper.type = 'AmpOptimWrapper'
    wrapper.dtype = dtype
    if dtype == 'float16':
        wrapper.setdefault('loss_scale', 'dynamic')
    else:
        wrapper.pop('loss_scale', None)  # bfloat16 has float32's range: no loss scaling


def enable_auto_scale_lr(cfg) -> None:
    scale = cfg.get('auto_scale_lr') or {}
    if 'base_batch_size' not in scale:
        raise ValueError('--auto-scale-lr needs auto_scale_lr = dict(enable=False, base_batch_size=N) in the '
                         'config, N being the total batch size its learning rate was set for.')
    cfg.auto_scale_lr.enable = True


def main(argv=None) -> None:
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    setup_codebase(cfg)
    cfg.launcher = args.launcher
    default_work_dir(cfg, args.config, args.work_dir)
    if args.amp:
        enable_amp(cfg)
    if args.auto_scale_lr:
        enable_auto_scale_lr(cfg)
    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        if not osp.isfile(args.resume):
            raise FileNotFoundError(f'--resume {args.resume}: no such checkpoint file; pass an existing '
                                    f'.pth, or --resume alone for the latest one in the work dir.')
        cfg.resume, cfg.load_from = True, args.resume
    adapt_to_cpu(cfg)
    build_runner(cfg).train()


if __name__ == '__main__':
    main()
