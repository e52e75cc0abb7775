"""Timing and recording inside a check step: median time (CUDA events on a GPU), peak memory,
and rows that record a failure instead of stopping the step."""
import math
import statistics
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from inline_dense.analysis.memory import peak_tracker
from inline_dense.analysis.timing import time_calls

Emit = Callable[[dict[str, Any]], None]


def event_times(step: Callable[[], Any], warmup: int, runs: int) -> list[float]:
    """ms of each of ``runs`` calls after ``warmup`` calls, from CUDA events around each call."""
    for _ in range(warmup):
        step()
    pairs = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


def time_step(step: Callable[[], Any], warmup: int, runs: int, device: torch.device) -> dict[str, Any]:
    """{median_ms, min_ms, max_ms, peak_mib, timer}: CUDA events and ``max_memory_allocated`` on
    a GPU, wall clock and peak resident memory on the CPU (the benchmark's timing loop)."""
    tracker = peak_tracker(device)
    with tracker:
        if device.type == 'cuda':
            times, timer = event_times(step, warmup, runs), 'cuda events'
        else:
            times, timer = time_calls(step, warmup, runs, device)[0], 'wall clock'
    return dict(median_ms=round(statistics.median(times), 3), min_ms=round(min(times), 3),
                max_ms=round(max(times), 3), peak_mib=round(tracker.peak / 2 ** 20, 1), timer=timer)


def describe_error(err: BaseException) -> str:
    """'Type: message' and the innermost frame, on one line (a row's error field)."""
    frames = traceback.extract_tb(err.__traceback__)
    where = f' (at {frames[-1].filename.rsplit("/", 1)[-1]}:{frames[-1].lineno})' if frames else ''
    return f'{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ""}{where}'[:500]


def release(device: torch.device) -> None:
    """Frees cached CUDA blocks (after a model or an out-of-memory error)."""
    if device.type == 'cuda':
        torch.cuda.empty_cache()


@contextmanager
def recorded(emit: Emit, device: torch.device, **row: Any) -> Iterator[dict[str, Any]]:
    """Yields ``row`` to be filled in; emits it on exit with ``ok`` True, or, when the body
    raised, with ``ok`` False and the error, and the step goes on."""
    try:
        yield row
    except Exception as err:  # recorded, and the next measurement runs
        row.update(ok=False, error=describe_error(err))
        traceback.print_exc()
        release(device)
    else:
        row.setdefault('ok', True)
    emit(row)


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.detach().double().cpu() - b.detach().double().cpu()).abs().max().item() if a.numel() else 0.0


def rel_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| in float64 (NaN when a is not finite)."""
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    if not torch.isfinite(a).all():
        return math.nan
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def all_finite(*tensors: torch.Tensor | None) -> bool:
    return all(t is None or bool(torch.isfinite(t).all()) for t in tensors)
