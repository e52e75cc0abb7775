"""ONNX export with dynamic batch, height and width, and its check with onnxruntime.

:func:`export_onnx` runs PyTorch's dynamo-based exporter (``torch.export`` underneath) with
batch, height and width marked dynamic. :func:`check_onnx` runs the file with onnxruntime on
input sizes other than the export one and compares with PyTorch; it raises
:class:`OnnxMismatchError` past the tolerance. :func:`export_with_fallback` tries the InLine
layers' own ``attn_impl`` first and, should it fail to export, the other evaluations in turn.
:func:`mismatch_advice` says whether a failed check comes from the backbone or after it.
"""
import os
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sympy
import torch
from torch import nn
from torch.utils._sympy.numbers import int_oo  # torch.export's 'no upper bound'

from ..runtime import inline_impl, inline_layers, tensors_in
from ..warning_filters import quiet_export

Shape = tuple[int, int, int, int]

# The export example has batch 2: dynamo specialises sizes 0 and 1, so a batch-1 example
# would make the batch static. Its height and width make every size-dependent branch take its
# general side, the one that pads: not a multiple of 4, odd token grids at strides 4, 8 and 16
# (patch merging), grids at strides 4 to 32 that are multiples of neither 7 (Swin's window) nor
# 3 (small CSwin stripes). The graph then holds for any size. The check sizes differ from it and
# are multiples neither of 32 nor of 7; one has batch 2.
EXPORT_SHAPE: Shape = (2, 3, 289, 291)
CHECK_SHAPES: tuple[Shape, ...] = ((1, 3, 333, 445), (2, 3, 290, 375), (1, 3, 409, 297))
TOLERANCE = 1e-4
# Tried in this order when the layers' own evaluation does not export.
FALLBACK_IMPLS = ('folded_keys', 'reference')


class OnnxMismatchError(RuntimeError):
    """onnxruntime's outputs differ from PyTorch's by more than the tolerance (``shape``: the worst input)."""

    def __init__(self, message: str, shape: Shape | None = None, relative_error: float | None = None) -> None:
        super().__init__(message)
        self.shape = shape
        self.relative_error = relative_error


@dataclass
class CheckRow:
    """One input size checked: errors of the worst output, latencies (median, ms)."""
    shape: Shape
    max_abs_error: float
    relative_error: float  # max |ort - torch| / max |torch|, worst output
    ort_ms: float
    torch_ms: float


def dynamic_image_shapes() -> tuple[dict, ...]:
    """Batch, height and width of the one image input are dynamic."""
    dim = torch.export.Dim.DYNAMIC
    return ({0: dim, 2: dim, 3: dim},)


InputRanges = dict[str, tuple[int, int | None]]  # input axis name -> (lowest, highest or None: no bound)


def input_ranges(exported: 'torch.export.ExportedProgram') -> InputRanges:
    """(min, max or None) of the image's batch, height and width that the exported graph holds for:
    the branches taken while tracing (one window for a small grid, say) bound them."""
    name = exported.graph_signature.user_inputs[0]
    image = next(n for n in exported.graph.nodes if n.op == 'placeholder' and n.name == name)
    ranges = {}
    for axis, dim in zip(('batch', 'height', 'width'), (0, 2, 3)):
        size = image.meta['val'].shape[dim]
        bound = exported.range_constraints.get(getattr(size, 'node', None) and size.node.expr)
        if bound is None:
            ranges[axis] = (int(size), int(size))
        else:
            upper = None if bound.upper in (int_oo, sympy.oo) else int(bound.upper)
            ranges[axis] = (int(bound.lower), upper)
    return ranges


def export_onnx(module: nn.Module, path: str, output_names: Sequence[str],
                example_shape: Shape = EXPORT_SHAPE, opset: int | None = None) -> InputRanges:
    """Writes ``module`` (image -> tensor(s), in eval mode) to ``path`` with dynamic batch,
    height and width; returns :func:`input_ranges`. The example input is random: only its shape
    matters. From an example batch of 1 the graph is for a batch of 1: the backbones' capture makes it a
    constant, while torch reports a range above it (1 to 2 for InLine-PVT with torch 2.14, whose graph
    then fails in ONNX Runtime at 2), so the batch range returned is (1, 1)."""
    module.eval()
    example = torch.randn(*example_shape)
    with torch.no_grad(), quiet_export():
        program = torch.onnx.export(module, (example,), dynamo=True, input_names=['image'],
                                    output_names=list(output_names), dynamic_shapes=dynamic_image_shapes(),
                                    opset_version=opset, verbose=False)
    program.save(path, external_data=False)
    ranges = input_ranges(program.exported_program)
    if example_shape[0] == 1:
        ranges['batch'] = (1, 1)
    return ranges


def export_with_fallback(module: nn.Module, path: str, output_names: Sequence[str],
                         example_shape: Shape = EXPORT_SHAPE, opset: int | None = None,
                         log: Callable[[str], None] = print) -> tuple[str | None, InputRanges]:
    """:func:`export_onnx`, first with the InLine layers' own evaluation; if that fails,
    with each of ``FALLBACK_IMPLS`` in turn (saying so). Returns the impl used (None: the
    layers' own, or no InLine layer) and the input ranges. ``module``'s layers keep their own
    evaluation afterwards, whichever one exported."""
    layers = inline_layers(module)
    own = sorted({m.impl for m in layers})
    try:
        return None, export_onnx(module, path, output_names, example_shape, opset)
    except Exception as err:  # the exporter raises many types; the fallback says which
        if not layers:
            raise
        first = err
    for impl in FALLBACK_IMPLS:
        if own == [impl]:
            continue
        log(f'[export] attn_impl {own} did not export ({type(first).__name__}: {str(first)[:300]}); '
            f'trying attn_impl={impl!r} (the same function, evaluated another way)')
        try:
            with inline_impl(module, impl):
                return impl, export_onnx(module, path, output_names, example_shape, opset)
        except Exception as err:
            first = err
    raise RuntimeError(f'ONNX export failed with every attn_impl ({own} and {list(FALLBACK_IMPLS)}); '
                       f'last error: {type(first).__name__}: {first}') from first


def output_names(module: nn.Module, names: Sequence[str], example_shape: Shape = EXPORT_SHAPE) -> list[str]:
    """One name per tensor ``module`` returns for an input of ``example_shape`` (run once, eagerly):
    ``names`` when they match, else ``names[0]``'s stem numbered (a neck may add levels that its
    config does not count, as mmdet's ``ChannelMapper`` does: DINO returns 4 maps from 2 inputs)."""
    with torch.no_grad():
        count = len(list(tensors_in(module.eval()(torch.zeros(*example_shape)))))
    if count == len(names):
        return list(names)
    stem = re.sub(r'\d+$', '', names[0]) if names else 'out'
    return [f'{stem}{i}' for i in range(count)]


def _bounds(ranges: InputRanges, axis: str) -> tuple[int, int | None]:
    """An axis's range; a lower bound of 2 is read as 1: torch.export's symbolic sizes start at 2 (it
    specialises 0 and 1), which says nothing about size 1."""
    low, high = ranges[axis]
    return (1 if low <= 2 else low), high


def format_ranges(ranges: InputRanges) -> str:
    """'batch 1..any, height 33..any, ...': the sizes the graph holds for, as the checks read them
    (a lower bound of 2 as 1, see :func:`_bounds`)."""
    spans = {axis: _bounds(ranges, axis) for axis in ranges}
    return ', '.join(f'{axis} {low}..{"any" if high is None else high}' for axis, (low, high) in spans.items())


def fit_check_shapes(shapes: Sequence[Shape], ranges: InputRanges, example_shape: Shape) -> list[Shape]:
    """``shapes`` moved inside the sizes the exported graph holds for (``ranges``, from
    :func:`input_ranges`): each axis clamped to its range, then stepped down (7 rows, 5 columns at a
    time) while it repeats an earlier size or the export size; a size that cannot be made new is left out."""
    def inside(value: int, axis: str) -> int:
        low, high = _bounds(ranges, axis)
        value = max(value, low)
        return value if high is None else min(value, high)
    fitted: list[Shape] = []
    for b, c, h, w in shapes:
        shape = (inside(b, 'batch'), c, inside(h, 'height'), inside(w, 'width'))
        for _ in range(16):
            if shape not in fitted and shape != tuple(example_shape):
                fitted.append(shape)
                break
            shape = (shape[0], c, inside(shape[2] - 7, 'height'), inside(shape[3] - 5, 'width'))
    return fitted


def outside_ranges(shapes: Sequence[Shape], ranges: InputRanges) -> list[Shape]:
    """The shapes the exported graph does not hold for (an axis below or above its range)."""
    def out(value: int, axis: str) -> bool:
        low, high = _bounds(ranges, axis)
        return value < low or (high is not None and value > high)
    return [s for s in shapes if out(s[0], 'batch') or out(s[2], 'height') or out(s[3], 'width')]


def median_ms(call: Callable[[], object], runs: int, warmup: int = 0) -> float:
    """The median wall time of ``runs`` calls (after ``warmup`` untimed ones), in ms."""
    for _ in range(warmup):
        call()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def check_onnx(path: str, module: nn.Module, shapes: Sequence[Shape] = CHECK_SHAPES,
               tolerance: float = TOLERANCE, runs: int = 3, threads: int = 0, seed: int = 0) -> list[CheckRow]:
    """Runs ``path`` with onnxruntime (CPU) and ``module`` with PyTorch on random inputs of
    ``shapes``; returns one row per shape. Raises :class:`OnnxMismatchError` (after checking
    every shape) when an output's relative error is above ``tolerance``."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    if threads:
        options.intra_op_num_threads = threads
    session = ort.InferenceSession(path, options, providers=['CPUExecutionProvider'])
    name = session.get_inputs()[0].name
    module.eval()
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for shape in shapes:
        image = torch.randn(*shape, generator=generator)
        feed = {name: image.numpy()}
        with torch.no_grad():
            ref = [t.float() for t in tensors_in(module(image))]
            torch_ms = median_ms(lambda image=image: module(image), runs)
        try:
            got = [torch.from_numpy(a) for a in session.run(None, feed)]
        except Exception as err:  # onnxruntime's own errors (Fail, RuntimeException, ...): one line, not a traceback
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise OnnxMismatchError(f'{path}: onnxruntime failed at input {shape} ({type(err).__name__}: '
                                    f'{first[:300]}). Do not deploy this file.', tuple(shape)) from err
        ort_ms = median_ms(lambda feed=feed: session.run(None, feed), runs)
        if len(got) != len(ref) or any(g.shape != r.shape for g, r in zip(got, ref)):
            raise OnnxMismatchError(
                f'{path}: at input {shape} onnxruntime returned shapes {[tuple(g.shape) for g in got]}, PyTorch '
                f'{[tuple(r.shape) for r in ref]}: the graph kept a size of the export input {EXPORT_SHAPE}.')
        abs_err = max(float((g - r).abs().max()) for g, r in zip(got, ref))
        rel_err = max(float((g - r).abs().max() / r.abs().max().clamp_min(1e-12)) for g, r in zip(got, ref))
        rows.append(CheckRow(tuple(shape), abs_err, rel_err, ort_ms, torch_ms))
    bad = [r for r in rows if not r.relative_error <= tolerance]
    if bad:
        worst = max(bad, key=lambda r: r.relative_error)
        raise OnnxMismatchError(
            f'{path}: onnxruntime differs from PyTorch by {worst.relative_error:.2e} relative (max abs '
            f'{worst.max_abs_error:.2e}) at input {worst.shape}, above the tolerance {tolerance:.0e}. '
            f'Sizes over: {[r.shape for r in bad]}. Do not deploy this file.', worst.shape, worst.relative_error)
    return rows


class BackboneOutputs(nn.Module):
    """A detector's or segmentor's backbone alone: image -> tuple of its stage outputs."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(self.backbone(image))


def backbone_of(module: nn.Module) -> nn.Module | None:
    """The backbone inside a :mod:`.wrappers` module (None for anything else)."""
    model = getattr(module, 'segmentor', None) or getattr(module, 'detector', None)
    return getattr(model, 'backbone', None)


def mismatch_advice(module: nn.Module, shape: Shape, tolerance: float, workdir: str,
                    opset: int | None = None, example_shape: Shape = EXPORT_SHAPE) -> str:
    """What to do about a failed check at input ``shape``: exports the backbone alone (into
    ``workdir``) and checks it at that size, to tell a backbone fault (another ``--attn-impl``
    may help) from one after it, in the neck or head (it cannot)."""
    backbone = backbone_of(module)
    if backbone is None:
        return 'Report the config and the sizes.'
    part = BackboneOutputs(backbone).eval()
    with torch.no_grad():
        count = len(part(torch.randn(*example_shape)))
    path = os.path.join(workdir, 'backbone.onnx')
    try:
        export_onnx(part, path, [f'stage{i}' for i in range(count)], example_shape, opset)
        row = check_onnx(path, part, [shape], tolerance, runs=1)[0]
    except OnnxMismatchError as err:
        layers = inline_layers(part)
        differs = f'The backbone alone already differs ({err.relative_error:.1e} relative at {shape})'
        if not layers:
            return f'{differs}; it has no InLine layers, so --attn-impl cannot help: report the config and the sizes.'
        others = [i for i in FALLBACK_IMPLS if i not in {m.impl for m in layers}]
        return (f'{differs}: re-export with another --attn-impl ({", ".join(others)}), or report the config '
                f'and the sizes.')
    except Exception as err:  # the diagnosis must not hide the check's verdict
        return f'(The backbone alone could not be checked: {type(err).__name__}: {str(err)[:200]}.) Report the sizes.'
    model = getattr(module, 'segmentor', None) or getattr(module, 'detector', None)
    after = ', '.join(type(getattr(model, name)).__name__ for name in ('neck', 'decode_head', 'rpn_head', 'bbox_head')
                      if getattr(model, name, None) is not None)
    return (f'The backbone alone matches ({row.relative_error:.1e} relative at {shape}): the difference arises '
            f'after it ({after}), so another --attn-impl cannot help; report the config and the sizes.')


def format_rows(rows: Sequence[CheckRow]) -> str:
    """The check as a small text table."""
    lines = [f'{"input (BxCxHxW)":<18} {"max abs err":>12} {"rel err":>10} {"onnxruntime ms":>15} '
             f'{"pytorch ms":>11}']
    for r in rows:
        lines.append(f'{"x".join(map(str, r.shape)):<18} {r.max_abs_error:>12.2e} {r.relative_error:>10.2e} '
                     f'{r.ort_ms:>15.1f} {r.torch_ms:>11.1f}')
    return '\n'.join(lines)
