"""Train an smp decoder with an InLine encoder from scratch on the toy ADE20K data (no OpenMMLab)
and report its validation mIoU (smp.metrics).

    python tools/train_smp_toy.py                          # UPerNet + small InLine-Swin, 150 s of training
    python tools/train_smp_toy.py --decoder FPN --variant inline_pvt_t --seconds 60

The data (data/toy_ade) is generated on first use. See inline_dense/smp_toy.py. Settings or data it
cannot use (a time budget or learning rate that is not a finite number > 0, a batch of fewer than 2,
an unknown decoder, a missing annotation, pictures of another size, fewer than 2 training images, a
--root that exists but is not a toy folder, e.g. a file or /dev/null, which is left untouched) end it
with one line, exit status 1.
"""
import argparse
import json
import sys

import torch


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description='Train smp + InLine on the toy ADE20K data, report mIoU')
    parser.add_argument('--root', default=None, help='toy ADE folder (default data/toy_ade; made if missing)')
    parser.add_argument('--decoder', default='UPerNet', help="smp decoder class: UPerNet, FPN, Unet, ...")
    parser.add_argument('--variant', default='inline_swin_t', help='InLine encoder (timm name)')
    parser.add_argument('--full-width', action='store_true',
                        help="the variant's own depths and widths (default: a small model for the CPU)")
    parser.add_argument('--seconds', type=float, default=150.0, help='training time budget (wall clock)')
    parser.add_argument('--batch-size', type=int, default=8)
    parser.add_argument('--lr', type=float, default=2e-3)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--threads', type=int, default=None, help='torch threads (default: torch\'s)')
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f'--threads {args.threads}: give 1 or more (or leave it out for torch\'s default)')
        torch.set_num_threads(args.threads)

    from inline_dense.smp_toy import ToyRunError, train_toy

    try:
        run = train_toy(args.root, decoder=args.decoder, variant=args.variant,
                        encoder_kwargs=dict(drop_path_rate=0.0) if args.full_width else None,
                        train_seconds=args.seconds, batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    except (ToyRunError, FileNotFoundError, FileExistsError) as exc:  # bad settings or data, a --root that is not
        # a toy folder (a file, /dev/null: left untouched): one line, no traceback
        sys.exit(f'error: {exc}')
    result = dict(decoder=args.decoder, variant=args.variant, miou=round(run.miou, 4),
                  chance_miou=round(run.chance_miou, 4), class_iou={k: round(v, 4) for k, v in run.class_iou.items()},
                  epochs=run.epochs, steps=run.steps, train_seconds=round(run.train_seconds, 1),
                  total_seconds=round(run.total_seconds, 1))
    print(f'mIoU {run.miou:.3f} (chance {run.chance_miou:.3f}) after {run.steps} steps / {run.epochs} epochs; '
          f'{run.total_seconds:.0f} s in all')
    print(json.dumps(result))
    return result


if __name__ == '__main__':
    main(sys.argv[1:])
