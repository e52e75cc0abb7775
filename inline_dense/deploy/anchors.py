"""Anchors for a backbone's eager speed, measured in the same run: the exported ONNX graph in ONNX Runtime
(fp32) and in OpenVINO (fp32, and bf16 through its ``INFERENCE_PRECISION_HINT``), next to eager fp32
and eager bf16 autocast. OpenVINO is the optional extra ``inline_dense[openvino]``; without it (or when it
cannot read or compile the graph, the first line of its error naming the op) its rows carry the reason.

Each row: runtime, precision, median ms of ``runs`` calls after ``warmup``, and the relative L2 error of the
stage outputs against eager fp32 (all stages together).
"""
import functools
import os
import tempfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ..runtime.precision import autocast, native_bf16_cpu
from .onnx_export import BackboneOutputs, export_with_fallback, median_ms


def rel_error(outs: Sequence[Any], refs: Sequence[torch.Tensor]) -> float:
    def tensor(o: Any) -> torch.Tensor:
        return o.float() if isinstance(o, torch.Tensor) else torch.as_tensor(np.asarray(o)).float()
    num = sum(float(((tensor(o) - r) ** 2).sum()) for o, r in zip(outs, refs))
    den = sum(float((r ** 2).sum()) for r in refs)
    return (num / den) ** 0.5


def first_line(err: BaseException) -> str:
    text = ' '.join(str(err).split())
    return f'{type(err).__name__}: {text[:300]}'


def ort_session(path: str, threads: int) -> Callable[[np.ndarray], list[np.ndarray]]:
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=['CPUExecutionProvider'])
    return lambda image: sess.run(None, {'image': image})


def openvino_model(path: str, threads: int, precision: str) -> Callable[[np.ndarray], list[np.ndarray]]:
    """OpenVINO's CPU plugin on the ONNX file, ``precision`` 'f32' or 'bf16' as its inference-precision hint."""
    import openvino as ov
    core = ov.Core()
    model = core.read_model(path)
    compiled = core.compile_model(model, 'CPU', {'INFERENCE_PRECISION_HINT': precision,
                                                 'INFERENCE_NUM_THREADS': threads, 'NUM_STREAMS': 1})
    request = compiled.create_infer_request()

    def run(image: np.ndarray) -> list[np.ndarray]:
        result = request.infer({0: image})
        return [result[out] for out in compiled.outputs]
    return run


def anchor_rows(model: nn.Module, hw: Sequence[int], threads: int, warmup: int = 1, runs: int = 3,
                workdir: str | None = None) -> list[dict[str, Any]]:
    """Eager fp32 / bf16, ONNX Runtime fp32, OpenVINO fp32 / bf16 on one (1, 3, H, W) input."""
    torch.set_num_threads(threads)
    model.eval()
    image = torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        refs = [t.float() for t in model(image)]
    rows: list[dict[str, Any]] = []

    def add(runtime: str, precision: str, call: Callable[[], Any], outs: Sequence[Any] | None = None) -> None:
        try:
            outs = call() if outs is None else outs
            rows.append(dict(runtime=runtime, precision=precision, median_ms=median_ms(call, runs, warmup),
                             rel_error=rel_error(outs, refs), error=''))
        except Exception as err:  # an anchor that fails is reported, the others still run
            rows.append(dict(runtime=runtime, precision=precision, median_ms=None, rel_error=None,
                             error=first_line(err)))

    def eager(dtype: torch.dtype | None) -> Callable[[], Any]:
        def call() -> Any:
            with torch.no_grad(), autocast('cpu', dtype):
                return model(image)
        return call

    add('eager', 'fp32', eager(None))
    if native_bf16_cpu():
        add('eager', 'bf16', eager(torch.bfloat16))
    folder = workdir or tempfile.mkdtemp(prefix='inline_anchors_')
    path = os.path.join(folder, 'backbone.onnx')
    names = [f'stage{i}' for i in range(len(refs))]
    try:
        export_with_fallback(BackboneOutputs(model), path, names, example_shape=(1, 3, hw[0], hw[1]),
                             log=lambda _: None)
    except Exception as err:
        return [*rows, dict(runtime='onnx export', precision='fp32', median_ms=None, rel_error=None,
                            error=first_line(err))]
    array = image.numpy()
    try:
        ort_run = ort_session(path, threads)
        add('onnxruntime', 'fp32', lambda: ort_run(array))
    except Exception as err:
        rows.append(dict(runtime='onnxruntime', precision='fp32', median_ms=None, rel_error=None,
                         error=first_line(err)))
    for precision in ('f32', 'bf16'):
        label = 'fp32' if precision == 'f32' else 'bf16'
        if precision == 'bf16' and not native_bf16_cpu():
            continue
        try:
            ov_run = openvino_model(path, threads, precision)
        except ImportError:
            rows.append(dict(runtime='openvino', precision=label, median_ms=None, rel_error=None,
                             error='not installed: pip install "inline_dense[openvino]"'))
            continue
        except Exception as err:  # read_model / compile_model name the op they cannot handle
            rows.append(dict(runtime='openvino', precision=label, median_ms=None, rel_error=None,
                             error=first_line(err)))
            continue
        add('openvino', label, functools.partial(ov_run, array))
    return rows


def format_anchor_rows(name: str, hw: Sequence[int], rows: list[dict[str, Any]]) -> str:
    """A table; each time also as a multiple of OpenVINO's in the same precision where it ran."""
    ov = {r['precision']: r['median_ms'] for r in rows if r['runtime'] == 'openvino' and r['median_ms']}
    lines = [f'{name} @ {hw[0]}x{hw[1]}:', f'  {"runtime":12s} {"dtype":>5s} {"median ms":>10s} {"rel err":>9s} '
             f'{"x OpenVINO":>10s}  note']
    for r in rows:
        ms = '-' if r['median_ms'] is None else f'{r["median_ms"]:.1f}'
        err = '-' if r['rel_error'] is None else f'{r["rel_error"]:.1e}'
        vs = (f'{r["median_ms"] / ov[r["precision"]]:.2f}' if r['median_ms'] and r['precision'] in ov else '-')
        lines.append(f'  {r["runtime"]:12s} {r["precision"]:>5s} {ms:>10s} {err:>9s} {vs:>10s}  {r["error"]}')
    return '\n'.join(lines)
