"""Export an InLine segmentor (image -> per-class logits) or detector (image -> backbone + neck
features) to ONNX with dynamic batch, height and width, then check it with onnxruntime.

Examples (see README, Deploy)::

    python tools/export_onnx.py configs/upernet/upernet_inline-swin-t_8xb2-160k_ade20k-512x512.py \\
        --out work_dirs/upernet_inline-swin-t.onnx
    python tools/export_onnx.py configs/mask_rcnn/mask-rcnn_inline-swin-t_fpn_1x_coco.py \\
        work_dirs/mask_rcnn/iter_90000.pth --out mask-rcnn_inline-swin-t_features.onnx

Without a checkpoint the weights are random (the export and the check still mean something).
The input is the normalised image: the data preprocessor's mean/std is not in the graph.
The check runs three sizes not used at export (by default: inside the sizes the exported graph
holds for, which the log prints; given --check-shapes outside them are refused) and exits non-zero
when onnxruntime differs from PyTorch by more than --tolerance (relative to the largest output
value) or fails to run; it then checks the
backbone alone to say whether the fault is in the backbone (another --attn-impl may help) or after
it. The file is written to a temporary name next to --out and moved to --out only when the check
passes: a failed export never replaces an existing --out.
"""
import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence

from mmengine.config import DictAction

import inline_dense.openmmlab  # noqa: F401  (the mmcv ops, the backbones, hooks and inline:// for mmengine)
from inline_dense.checkpoint import atomic
from inline_dense.deploy import onnx_export
from inline_dense.layers.inline_attention import IMPLS


def parse_shape(text: str) -> tuple[int, int, int, int]:
    """'BxCxHxW' -> (B, C, H, W)."""
    try:
        shape = tuple(int(v) for v in text.lower().split('x'))
    except ValueError:
        shape = ()
    if len(shape) != 4 or min(shape) < 1:
        raise argparse.ArgumentTypeError(f'expected BxCxHxW with positive sizes, e.g. 2x3x290x375; got {text!r}')
    return shape  # type: ignore[return-value]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('config', help='mmseg (whole segmentor) or mmdet (backbone + neck) config')
    p.add_argument('checkpoint', nargs='?', default=None, help='whole-model .pth (default: random weights)')
    p.add_argument('--out', required=True, help='ONNX file to write')
    p.add_argument('--attn-impl', choices=list(IMPLS), default=None,
                   help="evaluation of the InLine layers (default: the config's, 'auto')")
    p.add_argument('--export-shape', type=parse_shape, default=onnx_export.EXPORT_SHAPE,
                   help='BxCxHxW of the example input (batch >= 2: dynamo fixes a batch of 1)')
    p.add_argument('--check-shapes', type=parse_shape, nargs='+', default=None,
                   help='BxCxHxW sizes checked with onnxruntime (default: '
                        f'{" ".join("x".join(map(str, s)) for s in onnx_export.CHECK_SHAPES)}, moved inside the '
                        'sizes the exported graph holds for)')
    p.add_argument('--tolerance', type=float, default=onnx_export.TOLERANCE,
                   help='largest relative error accepted (max |ort - torch| / max |torch|)')
    p.add_argument('--runs', type=int, default=3, help='timed runs per size (median reported)')
    p.add_argument('--threads', type=int, default=0, help='torch and onnxruntime threads (0: their default)')
    p.add_argument('--opset', type=int, default=None, help="ONNX opset (default: the exporter's)")
    p.add_argument('--cfg-options', nargs='+', action=DictAction, default=None,
                   help='override config settings, key=value (as in tools/train.py)')
    args = p.parse_args(argv)
    if not os.path.isfile(args.config):
        p.error(f'config {args.config!r} not found')
    if args.checkpoint and not os.path.isfile(args.checkpoint):
        p.error(f'checkpoint {args.checkpoint!r} not found')
    if args.export_shape[0] < 2:
        p.error('--export-shape needs a batch of at least 2: torch.export treats a batch of 1 as a constant')
    if args.check_shapes and args.export_shape in args.check_shapes:
        p.error('--check-shapes must differ from --export-shape: the check is about the other sizes')
    try:  # a directory, device or FIFO is refused now, not after the export; a symlink is written through
        atomic.output_target(args.out)
    except atomic.OutputPathError as exc:
        p.error(f'--out: {exc}')
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    from inline_dense.deploy import deployable
    if args.threads:
        torch.set_num_threads(args.threads)
    from inline_dense.openmmlab.config_model import UnsupportedConfigModel
    try:  # a head that cannot run on an image batch is refused here, before any export is tried
        module, task, outputs = deployable(args.config, args.checkpoint, args.attn_impl, args.cfg_options)
    except UnsupportedConfigModel as exc:
        print(f'[export] FAILED: {exc}', file=sys.stderr)
        return 2
    what = 'segmentor: image -> logits' if task == 'segmentation' else 'detector backbone + neck: image -> features'
    print(f'[export] {os.path.basename(args.config)} ({what}; weights: {args.checkpoint or "random"})')
    os.makedirs(os.path.dirname(os.path.abspath(atomic.output_target(args.out))), exist_ok=True)
    # Written to a temporary file next to --out, moved there only once the check passes: an
    # existing --out is never replaced by a failed export, and a failed one is not left behind.
    tmp = atomic.temporary_path(args.out)
    try:
        return _export_and_check(args, module, outputs, tmp)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _export_and_check(args: argparse.Namespace, module, outputs, tmp: str) -> int:
    t0 = time.perf_counter()
    outputs = onnx_export.output_names(module, outputs, args.export_shape)  # a neck may add levels
    used, ranges = onnx_export.export_with_fallback(module, tmp, outputs, args.export_shape, args.opset)
    print(f'[export] exported ({os.path.getsize(tmp) / 2 ** 20:.1f} MiB) in '
          f'{time.perf_counter() - t0:.0f} s from a {"x".join(map(str, args.export_shape))} example; outputs: '
          f'{", ".join(outputs)}' + (f'; attn_impl switched to {used!r}' if used else ''))
    print(f'[export] valid input sizes: {onnx_export.format_ranges(ranges)}')
    if args.check_shapes is None:  # the defaults, moved inside what the graph holds for
        check_shapes = onnx_export.fit_check_shapes(onnx_export.CHECK_SHAPES, ranges, args.export_shape)
    else:
        check_shapes = args.check_shapes
        outside = onnx_export.outside_ranges(check_shapes, ranges)
        if outside:
            print(f'[export] FAILED: --check-shapes {" ".join("x".join(map(str, s)) for s in outside)} lie outside '
                  f'the valid input sizes above; check inside them, or export from a larger --export-shape '
                  f'(the graph keeps the branches its example takes). {args.out} not written.', file=sys.stderr)
            return 2
    if not check_shapes:
        print(f'[export] FAILED: the graph holds for the export size only; nothing else can be checked. Export '
              f'from another --export-shape. {args.out} not written.', file=sys.stderr)
        return 2
    try:
        rows = onnx_export.check_onnx(tmp, module, check_shapes, args.tolerance, args.runs, args.threads)
    except onnx_export.OnnxMismatchError as err:
        with tempfile.TemporaryDirectory() as work:
            advice = onnx_export.mismatch_advice(module, err.shape, args.tolerance, work, args.opset,
                                                  args.export_shape)
        kept = 'left unchanged' if os.path.exists(args.out) else 'not written'
        print(f'[export] FAILED: {str(err).replace(tmp, args.out)} {advice} {args.out} {kept}.', file=sys.stderr)
        return 1
    atomic.commit(tmp, args.out)
    print(onnx_export.format_rows(rows))
    print(f'[export] OK: onnxruntime matches PyTorch within {args.tolerance:.0e} relative at every size; '
          f'wrote {args.out}')
    return 0

if __name__ == '__main__':
    sys.exit(main())
