"""The timing loop, and the step it times: a forward pass, or a forward and backward pass.

Every latency the package reports (sweeps and the one-layer ablation) comes from
:func:`time_calls`: wall time and process CPU time of each call, after warm-up calls.
"""
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ..runtime import tensors_in


def sync(device: torch.device | None) -> None:
    """Waits for queued CUDA work on ``device`` (nothing to do on the CPU)."""
    if device is not None and device.type == 'cuda':
        torch.cuda.synchronize(device)


def time_calls(step: Callable[[], Any], warmup: int, runs: int,
               device: torch.device | None = None) -> tuple[list[float], list[float]]:
    """Calls ``step`` ``warmup`` times, then returns the wall times and the process CPU times
    (ms, all threads together) of ``runs`` more calls.

    On a shared machine the CPU time of a one-thread run is the steadier figure: time the
    process spends descheduled counts in the wall time but not in the CPU time.
    """
    for _ in range(warmup):
        step()
    sync(device)
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        sync(device)
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return wall, cpu


def output_sum(out: Any) -> torch.Tensor:
    """Sum of every floating-point tensor of a (nested) output: a scalar to call backward on."""
    return sum(t.float().sum() for t in tensors_in(out) if t.is_floating_point())


def make_step(model: nn.Module, x: torch.Tensor, mode: str) -> Callable[[], None]:
    """Inference: one forward under no_grad. Train: forward + backward of the outputs' sum."""
    if mode == 'infer':
        model.eval()

        def step() -> None:
            with torch.no_grad():
                model(x)
    elif mode == 'train':
        model.train()

        def step() -> None:
            output_sum(model(x)).backward()
            for p in model.parameters():
                p.grad = None
    else:
        raise ValueError(f"mode must be 'infer' or 'train', got {mode!r}")
    return step
