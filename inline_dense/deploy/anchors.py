"""Anchors for a backbone's eager speed, measured in the same run: the exported ONNX graph in ONNX Runtime
(fp32) and in OpenVINO (fp32, and bf16 through its ``INFERENCE_PRECISION_HINT``), next to eager fp32 and
eager bf16 autocast, and the compiled path (:mod:`inline_dense.runtime.compiling`) in both. OpenVINO is the
optional extra ``inline_dense[openvino]``; without it (or when it cannot read or compile the graph, the first
line of its error naming the op) its rows carry the reason.

Each row: runtime, precision, median wall ms and process CPU ms of the timed calls (interleaved rounds), and
the relative L2 error of the stage outputs against eager fp32 (all stages together).
"""
import copy
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from ..runtime.compiling import SIZES, compile_for_inference
from ..runtime.precision import autocast, native_bf16_cpu
from .onnx_export import BackboneOutputs, export_with_fallback


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
                workdir: str | None = None, compiled: Sequence[str] = SIZES, rounds: int = 1) -> list[dict[str, Any]]:
    """Eager fp32 / bf16, compiled fp32 / bf16 for each of ``compiled``'s sizes ('dynamic', 'static': copies of the
    model through :func:`inline_dense.runtime.compiling.compile_for_inference`), ONNX Runtime fp32, OpenVINO fp32 /
    bf16 on one (1, 3, H, W) input. Each runs once first (the compiled ones compile there; the outputs give the
    error), then ``rounds`` interleaved rounds (every runtime, then every runtime again) of ``warmup`` + ``runs``
    calls; ``median_ms`` and ``median_cpu_ms`` (process CPU time) are over all rounds' timed calls."""
    torch.set_num_threads(threads)
    model.eval()
    image = torch.randn(1, 3, *hw, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        refs = [t.float() for t in model(image)]
    rows: list[dict[str, Any]] = []
    calls: list[tuple[dict[str, Any], Callable[[], Any]]] = []

    def failed(runtime: str, precision: str, error: str) -> None:
        rows.append(dict(runtime=runtime, precision=precision, median_ms=None, median_cpu_ms=None, rel_error=None,
                         error=error))

    def add(runtime: str, precision: str, call: Callable[[], Any]) -> None:
        try:
            row = dict(runtime=runtime, precision=precision, median_ms=None, median_cpu_ms=None,
                       rel_error=rel_error(call(), refs), error='')
        except Exception as err:  # an anchor that fails is reported, the others still run
            failed(runtime, precision, first_line(err))
            return
        rows.append(row)
        calls.append((row, call))

    def run(module: nn.Module, dtype: torch.dtype | None) -> Callable[[], Any]:
        def call() -> Any:
            with torch.no_grad(), autocast('cpu', dtype):
                return module(image)
        return call

    add('eager', 'fp32', run(model, None))
    if native_bf16_cpu():
        add('eager', 'bf16', run(model, torch.bfloat16))
    for sizes in compiled:
        twin = copy.deepcopy(model)
        if not compile_for_inference(twin, sizes=sizes):  # one line said why; the rows are left out
            break
        label = 'compiled' if sizes == 'dynamic' else f'compiled {sizes}'
        add(label, 'fp32', run(twin, None))
        if native_bf16_cpu():
            add(label, 'bf16', run(twin, torch.bfloat16))
    folder = workdir or tempfile.mkdtemp(prefix='inline_anchors_')
    path = os.path.join(folder, 'backbone.onnx')
    names = [f'stage{i}' for i in range(len(refs))]
    try:
        export_with_fallback(BackboneOutputs(model), path, names, example_shape=(1, 3, hw[0], hw[1]),
                             log=lambda _: None)
    except Exception as err:
        failed('onnx export', 'fp32', first_line(err))
        time_interleaved(calls, warmup, runs, rounds)
        return rows
    array = image.numpy()
    try:
        ort_run = ort_session(path, threads)
        add('onnxruntime', 'fp32', lambda: ort_run(array))
    except Exception as err:
        failed('onnxruntime', 'fp32', first_line(err))
    for precision in ('f32', 'bf16'):
        label = 'fp32' if precision == 'f32' else 'bf16'
        if precision == 'bf16' and not native_bf16_cpu():
            continue
        try:
            ov_run = openvino_model(path, threads, precision)
        except ImportError:
            failed('openvino', label, 'not installed: pip install "inline_dense[openvino]"')
            continue
        except Exception as err:  # read_model / compile_model name the op they cannot handle
            failed('openvino', label, first_line(err))
            continue
        add('openvino', label, functools.partial(ov_run, array))
    time_interleaved(calls, warmup, runs, rounds)
    return rows


def time_interleaved(calls: Sequence[tuple[dict[str, Any], Callable[[], Any]]], warmup: int, runs: int,
                     rounds: int) -> None:
    """Fills each row's ``median_ms`` / ``median_cpu_ms``: ``rounds`` rounds over all the calls in turn, each
    ``warmup`` untimed then ``runs`` timed calls (wall and process CPU time)."""
    wall: dict[int, list[float]] = {i: [] for i in range(len(calls))}
    cpu: dict[int, list[float]] = {i: [] for i in range(len(calls))}
    for _ in range(rounds):
        for i, (_row, call) in enumerate(calls):
            for _ in range(warmup):
                call()
            for _ in range(runs):
                t0, c0 = time.perf_counter(), time.process_time()
                call()
                wall[i].append((time.perf_counter() - t0) * 1e3)
                cpu[i].append((time.process_time() - c0) * 1e3)
    for i, (row, _call) in enumerate(calls):
        if wall[i]:
            row['median_ms'] = statistics.median(wall[i])
            row['median_cpu_ms'] = statistics.median(cpu[i])


def format_anchor_rows(name: str, hw: Sequence[int], rows: list[dict[str, Any]]) -> str:
    """A table; each time also as a multiple of OpenVINO's in the same precision where it ran."""
    ov = {r['precision']: r for r in rows if r['runtime'] == 'openvino' and r['median_ms']}
    lines = [f'{name} @ {hw[0]}x{hw[1]}:', f'  {"runtime":16s} {"dtype":>5s} {"median ms":>10s} {"CPU ms":>8s} '
             f'{"rel err":>9s} {"x OpenVINO":>10s} {"(CPU t)":>8s}  note']
    for r in rows:
        ms = '-' if r['median_ms'] is None else f'{r["median_ms"]:.1f}'
        cpu = '-' if r.get('median_cpu_ms') is None else f'{r["median_cpu_ms"]:.1f}'
        err = '-' if r['rel_error'] is None else f'{r["rel_error"]:.1e}'
        ref = ov.get(r['precision'])
        vs = f'{r["median_ms"] / ref["median_ms"]:.2f}' if r['median_ms'] and ref else '-'
        vs_cpu = (f'{r["median_cpu_ms"] / ref["median_cpu_ms"]:.2f}'
                  if r.get('median_cpu_ms') and ref and ref.get('median_cpu_ms') else '-')
        lines.append(f'  {r["runtime"]:16s} {r["precision"]:>5s} {ms:>10s} {cpu:>8s} {err:>9s} {vs:>10s} '
                     f'{vs_cpu:>8s}  {r["error"]}')
    ours = [r for r in rows if r['runtime'] == 'eager' or r['runtime'].startswith('compiled')]
    fp32 = next((r for r in ours if r['runtime'] == 'eager' and r['precision'] == 'fp32' and r['median_ms']), None)
    bf16 = [r for r in ours if r['precision'] == 'bf16' and r['median_ms']]
    if fp32 is not None and bf16:
        best = min(bf16, key=lambda r: r['median_ms'])
        ratio = best['median_ms'] / fp32['median_ms']
        lines.append(f'  fastest bf16 path ({best["runtime"]}) / eager fp32: {ratio:.2f}')
    return '\n'.join(lines)
