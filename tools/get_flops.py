"""FLOPs (multiply-accumulates) and parameters of backbones or whole models.

    python tools/get_flops.py --models inline-swin-t inline-cswin-t swin-t inline-pvt-t pvt-t --shapes 224x224 800x1216
    python tools/get_flops.py --config configs/retinanet/retinanet_inline-pvt-t_fpn_1x_coco.py --shapes 800x1216
    python tools/get_flops.py configs/retinanet/retinanet_inline-pvt-t_fpn_1x_coco.py --shape 800 1216  # mmdet's

Every matrix product a forward pass runs is counted at the ATen level (see
``inline_dense/analysis/flops.py``), so attention's ``@`` products are included and
InLine attention's are counted with their true, linear-in-tokens shapes. InLine
attention is counted for its textbook algorithm unless ``--executed`` is given.
"""
import argparse
import json
from collections.abc import Sequence
from typing import Any

import inline_dense.openmmlab  # noqa: F401  (the mmcv ops, the backbones, hooks and inline:// for mmengine)
from inline_dense.analysis import zoo
from inline_dense.analysis.jobs import parse_hw
from inline_dense.checkpoint.atomic import OutputPathError, output_target, write_output


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--models', nargs='+', default=None,
                   help=f'backbone names, as in tools/benchmark.py (default {" ".join(zoo.DEFAULT_MODELS)})')
    p.add_argument('configs', nargs='*', metavar='CONFIG', help="mmdet's spelling: CONFIG [--shape H W], as --config")
    p.add_argument('--config', nargs='+', default=[], help='mmdet/mmseg config(s) of whole models')
    p.add_argument('--shapes', nargs='+', type=parse_hw, default=None, help='HxW inputs (default 224x224 800x1216)')
    p.add_argument('--shape', nargs='+', type=int, default=None, metavar='SIDE',
                   help="mmdet's spelling of one input: H W, or one side for a square (as --shapes HxW)")
    p.add_argument('--executed', action='store_true',
                   help="count the ops InLine attention's fast path runs, not its textbook algorithm")
    p.add_argument('--by-op', action='store_true', help='also print MACs per ATen op')
    p.add_argument('--json', default=None, help='write the figures to this JSON file')
    args = p.parse_args(argv)
    args.config = [*args.configs, *args.config]
    if args.shape is not None:
        if args.shapes is not None:
            p.error('give --shape H W (mmdet\'s) or --shapes HxW ..., not both')
        if len(args.shape) not in (1, 2) or min(args.shape) < 1:
            p.error(f'--shape {" ".join(map(str, args.shape))}: give H W, or one side for a square, each 1 or more')
        args.shapes = [(args.shape[0], args.shape[-1])]
    elif args.shapes is None:
        args.shapes = [(224, 224), (800, 1216)]
    if args.models is None:
        args.models = [] if args.config else list(zoo.DEFAULT_MODELS)
    problem = zoo.check_entries(args.models, args.config)
    if problem:
        p.error(problem)
    if args.json:
        try:  # checkpoint.atomic's rule: a directory, device or FIFO refused; a symlink written through
            output_target(args.json)
        except OutputPathError as exc:
            p.error(f'--json: {exc}')
    return args


def main(argv: Sequence[str] | None = None) -> None:
    import torch

    from inline_dense.analysis import count_flops
    args = parse_args(argv)
    rows: list[dict[str, Any]] = []
    print(f'{"model":28s} {"input":>10s} {"params (M)":>10s} {"GFLOPs":>8s} {"attention":>10s} {"share":>6s}')
    for name, config in zoo.model_entries(args.models, args.config):
        model = zoo.build_model(None if config else name, config)
        zoo.init_model(model)
        model.eval()
        for h, w in args.shapes:
            report = count_flops(model, torch.randn(1, 3, h, w), executed=args.executed)
            rows.append(dict(model=name, height=h, width=w, params=report.params, macs=report.total,
                             attention_macs=report.attention, by_op=report.by_op))
            print(f'{name:28s} {h:>4d}x{w:<5d} {report.params / 1e6:10.2f} {report.total / 1e9:8.2f} '
                  f'{report.attention / 1e9:10.2f} {report.attention / max(report.total, 1):6.1%}')
            if args.by_op:
                for op, macs in sorted(report.by_op.items(), key=lambda kv: -kv[1]):
                    print(f'{"":30s}{op:>44s} {macs / 1e9:8.3f}')
    print('\nGFLOPs = 1e9 multiply-accumulates (the papers\' convention); "attention" = inside attention '
          'modules, projections included.')
    if args.json:
        write_output(args.json, json.dumps(dict(executed=args.executed, results=rows), indent=1))
        print(f'wrote {args.json}')


if __name__ == '__main__':
    from inline_dense.openmmlab.config_model import UnsupportedConfigModel
    try:
        main()
    except UnsupportedConfigModel as exc:  # one line, no traceback
        raise SystemExit(f'error: {exc}') from None
