"""Train a detector (MMDetection) or a segmentor (MMSegmentation) from any inline_dense config.

    python tools/train.py CONFIG [--work-dir DIR] [--resume [CKPT]] [--amp] [--allow-partial-load]
                          [--cfg-options k=v ...] [--launcher {none,pytorch,slurm,mpi}]

Whether the config is a detection or a segmentation one is read from its default_scope
('mmdet' / 'mmseg', set by either package's default_runtime.py) or its model type.

Before training it checks that the datasets exist, that ``load_from`` fits the model
(``--allow-partial-load`` to load only the matching weights on purpose), and warns when a
killed run could not be resumed exactly. ``--resume`` continues from the work directory's own
latest checkpoint (also after the directory was moved) with the interrupted run's seeds. On the CPU
the tool keeps freed memory in the process (``inline_dense.runtime.allocator``).
"""
import argparse
import glob
import os.path as osp
import warnings

import inline_dense.openmmlab  # noqa: F401  (the mmcv ops, the backbones, hooks and inline:// for mmengine)
from inline_dense.checkpoint import CheckpointError
from inline_dense.openmmlab.engine import launch
from inline_dense.openmmlab.engine.checkpointing import (
    HookOptionError,
    is_complete_checkpoint,
    newest_complete_checkpoint,
    own_checkpoint,
)
from inline_dense.openmmlab.engine.dataset_checks import DatasetCheckError, check_dataset_and_heads
from inline_dense.openmmlab.engine.mmengine_compat import UnsupportedMmengine
from inline_dense.openmmlab.engine.randomness import resume_exactness_problems, saved_seeds
from inline_dense.openmmlab.engine.resume_checks import (
    MissingResumeCheckpoint,
    ResumeError,
    config_changes,
    recorded_config,
    training_checkpoint,
)
from inline_dense.openmmlab.engine.tool_inputs import ToolInputError, check_work_dir
from inline_dense.openmmlab.mmcv_ops import uses_stand_in

USER_ERRORS = (CheckpointError, HookOptionError, DatasetCheckError, launch.MissingDatasetError, ToolInputError,
               UnsupportedMmengine)


def parse_args(argv=None) -> argparse.Namespace:
    from mmengine.config import DictAction
    parser = argparse.ArgumentParser(description='Train an MMDetection or MMSegmentation model')
    parser.add_argument('config', help='config file')
    parser.add_argument('--work-dir', help='where logs and checkpoints go (default work_dirs/<config name>)')
    parser.add_argument('--resume', nargs='?', type=str, const='auto',
                        help='resume from a checkpoint path; alone: from the latest checkpoint in the work dir')
    parser.add_argument('--amp', action='store_true',
                        help='automatic mixed precision (float16 on GPU; bfloat16 on CPU)')
    parser.add_argument('--allow-partial-load', action='store_true',
                        help='with load_from: load the weights that fit and go on (default: refuse a checkpoint '
                             'that does not fit the model, naming the missing / unexpected weights)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the learning rate by (total batch size / auto_scale_lr.base_batch_size)')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config settings, key=value (e.g. train_cfg.max_iters=100 '
                             'model.backbone.drop_path_rate=0.2); lists as key="[a,b]"')
    parser.add_argument('--launcher', choices=['none', 'pytorch', 'slurm', 'mpi'], default='none',
                        help='job launcher (pytorch = torchrun; see tools/dist_train.sh)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    launch.set_local_rank(args.local_rank)
    return args


def enable_amp(cfg) -> None:
    """AmpOptimWrapper: float16 with a dynamic loss scale on GPUs, bfloat16 (no scaling) on a CPU with
    native bf16; on a CPU without it, one line and float32 (emulated bf16 is slower).

    A dtype already set in the config's optim_wrapper is kept.
    """
    import torch
    from mmengine.device import get_device

    from inline_dense.openmmlab.engine.amp import enable_amp_training
    from inline_dense.runtime.precision import amp_dtype
    wrapper = cfg.optim_wrapper
    device = get_device()
    dtype = wrapper.get('dtype') or ('bfloat16' if device == 'cpu' else 'float16')
    if device == 'cpu':
        if dtype == 'float16':
            raise ValueError('--amp with optim_wrapper.dtype=float16 needs a GPU: torch has no float16 '
                             'autocast on CPU. Leave dtype unset (bfloat16 is used on CPU) or drop --amp.')
        if amp_dtype('cpu') is None:  # it printed why
            return
        model = cfg.get('model') or {}
        # mmcv-lite's stand-in runs NMS / RoIAlign on bfloat16 boxes and features in float32.
        if (model.get('rpn_head') or model.get('roi_head')) and not uses_stand_in():
            raise ValueError(f'--amp on CPU: {model.get("type")} proposes boxes with compiled mmcv\'s NMS / RoIAlign, '
                             f'whose CPU kernels have no bfloat16 version. On CPU with compiled mmcv, --amp works '
                             f'for one-stage detectors (RetinaNet) and the segmentors; train this model without '
                             f'--amp, with --amp on a GPU, or on mmcv-lite (MMCV=lite bash tools/setup_env.sh).')
    enable_amp_training(cfg, getattr(torch, dtype), 'cpu' if device == 'cpu' else 'cuda')


def enable_auto_scale_lr(cfg) -> None:
    scale = cfg.get('auto_scale_lr') or {}
    if 'base_batch_size' not in scale:
        raise ValueError('--auto-scale-lr needs auto_scale_lr = dict(enable=False, base_batch_size=N) in the '
                         'config, N being the total batch size its learning rate was set for.')
    cfg.auto_scale_lr.enable = True


def main(argv=None) -> None:
    args = parse_args(argv)
    cfg = launch.load_config(args.config, args.cfg_options)
    launch.setup_codebase(cfg)
    cfg.launcher = args.launcher
    launch.default_work_dir(cfg, args.config, args.work_dir)
    check_work_dir(cfg.work_dir)
    from mmengine.device import get_device

    from inline_dense.runtime.allocator import tool_default
    tool_default(get_device())
    if args.amp:
        enable_amp(cfg)
    if args.auto_scale_lr:
        enable_auto_scale_lr(cfg)
    if args.resume == 'auto':
        target = own_checkpoint(cfg.work_dir)
        if target is None:
            warn_nothing_to_resume(cfg.work_dir)
        elif not is_complete_checkpoint(target):
            target = complete_fallback(cfg, target)
        cfg.resume, cfg.load_from = True, target if is_complete_checkpoint(target) else None
    elif args.resume is not None:
        if not osp.isfile(args.resume):
            raise MissingResumeCheckpoint(f'--resume {args.resume}: no such checkpoint file; pass an existing '
                                          f'.pth, or --resume alone for the latest one in the work dir.')
        cfg.resume, cfg.load_from = True, args.resume
    checkpoint = None
    if cfg.get('resume') and cfg.get('load_from'):
        checkpoint = resumable(cfg.load_from)
        use_saved_seeds(cfg, cfg.load_from)
    if cfg.get('resume'):  # also when AtomicCheckpointHook picks the checkpoint (a fallback) at the start
        source = f'--resume {cfg.load_from}' if cfg.get('load_from') else '--resume (the work dir\'s checkpoint)'
        cfg.custom_hooks = [*(cfg.get('custom_hooks') or []),
                            dict(type='CheckpointFitHook', source=source, resume=True)]
    elif cfg.get('load_from'):
        cfg.custom_hooks = [*(cfg.get('custom_hooks') or []),
                            dict(type='CheckpointFitHook', allow_partial=args.allow_partial_load, source=cfg.load_from)]
    launch.check_datasets(cfg, ('train_dataloader', 'val_dataloader'))
    check_dataset_and_heads(cfg, ('train_dataloader', 'val_dataloader'))
    for problem in resume_exactness_problems(cfg):
        warnings.warn(f'a killed run of this config cannot be resumed exactly: {problem}.', stacklevel=1)
    launch.adapt_to_cpu(cfg)
    if checkpoint is not None:
        check_resumed_config(cfg, checkpoint, cfg.load_from)
    with launch.loader_workers_ended(launch.build_runner(cfg)) as runner:
        runner.train()


def warn_nothing_to_resume(work_dir: str) -> None:
    """--resume alone in a work dir that names no checkpoint: training starts from iteration 0."""
    found = sorted(osp.basename(p) for p in glob.glob(osp.join(work_dir, '*.pth')))
    there = (f' It holds {", ".join(found[:4])}: to resume from one of them, pass --resume '
             f'{osp.join(work_dir, found[-1])}.' if found else '')
    warnings.warn(f'--resume: {osp.abspath(work_dir)} has no last_checkpoint, so there is nothing to resume: '
                  f'training starts from scratch (iteration 0).{there} If you meant another run, pass its '
                  f'--work-dir.', stacklevel=2)


def complete_fallback(cfg, target: str) -> str:
    """The newest complete checkpoint beside ``target`` (missing or truncated), picked here rather than
    when the Runner starts so that it is checked like a named one; ``target`` when there is none
    (AtomicCheckpointHook then refuses with its own message)."""
    hook = (cfg.get('default_hooks') or {}).get('checkpoint') or {}
    template = hook.get('filename_tmpl') or ('epoch_{}.pth' if hook.get('by_epoch', True) else 'iter_{}.pth')
    fallback = newest_complete_checkpoint(osp.dirname(target) or cfg.work_dir, template)
    if fallback is None:
        return target
    warnings.warn(f'--resume: the work dir names {target}, which is missing or truncated; resuming from {fallback}, '
                  f'the newest complete checkpoint beside it.', stacklevel=2)
    return fallback


def resumable(path: str) -> dict:
    """The checkpoint at ``path`` if training wrote it; otherwise a ResumeError in command-line terms."""
    try:
        return training_checkpoint(path)
    except ResumeError as exc:
        advice = {'incomplete': 'On the command line: --resume WORK_DIR/iter_N.pth, or --resume alone.',
                  'weights_only': f'On the command line: --cfg-options load_from={path} without --resume.'}
        raise ResumeError(f'{exc} {advice.get(exc.kind, "")}'.rstrip(), exc.kind) from None


def check_resumed_config(cfg, checkpoint: dict, path: str) -> None:
    """Refuses settings the resume would override with the checkpoint's; warns about those the new
    config changes for the rest of the run (what the dumped config and new checkpoints record)."""
    saved = recorded_config(checkpoint)
    if saved is None:
        warnings.warn(f'--resume {path}: the checkpoint records no config (meta.cfg), so changed settings '
                      f'cannot be detected; the optimizer and schedule continue from its saved state.',
                      stacklevel=2)
        return
    before, now = (saved.get('model') or {}).get('type'), (cfg.get('model') or {}).get('type')
    if before != now:
        raise ResumeError(f'--resume {path}: that checkpoint was trained for a {before} model (its meta.cfg), this '
                          f'config builds a {now}: it is another model\'s checkpoint. Resume from a checkpoint of '
                          f'this config, or start from its weights with --cfg-options load_from={path} '
                          f'--allow-partial-load (without --resume).')
    changes = config_changes(saved, cfg)
    if changes['overridden']:
        raise ResumeError(
            f'--resume {path}: these settings differ from the ones the checkpoint was trained with, and a resume '
            f'restores the optimizer and schedule state saved in the checkpoint, so the old values would win '
            f'while the config recorded for the run says the new ones: {"; ".join(changes["overridden"])}. '
            f'Resume with the checkpoint\'s settings (drop these --cfg-options or config edits), or start a new '
            f'schedule from its weights: --cfg-options load_from={path} without --resume.')
    if changes['applied']:
        warnings.warn(f'--resume {path}: settings changed since the checkpoint was written; the new values apply '
                      f'from its iteration on (weights, optimizer state and schedule position come from the '
                      f'checkpoint), and the dumped config and new checkpoints record them: '
                      f'{"; ".join(changes["applied"])}.', stacklevel=2)


def use_saved_seeds(cfg, checkpoint: str) -> None:
    """The run's seed and its sampler's from ``checkpoint``, so that the data sampler and workers
    built before the checkpoint is read draw what the interrupted run drew."""
    seeds = saved_seeds(checkpoint)
    if seeds is None:
        return
    cfg.randomness = dict(cfg.get('randomness') or {}, seed=seeds['seed'])
    sampler = (cfg.get('train_dataloader') or {}).get('sampler')
    if seeds['sampler_seed'] is not None and isinstance(sampler, dict) and sampler.get('seed') is None:
        sampler['seed'] = seeds['sampler_seed']


if __name__ == '__main__':
    launch.run_tool(main, USER_ERRORS)
