"""Benchmark jobs: what one (model, resolution, mode) measurement is, measuring it in this
process, and running a sweep of them, each in a fresh subprocess, round after round.

A fresh process per job makes the peak resident memory that job's alone. The worker
(:mod:`inline_dense.analysis.worker`) receives the :class:`Job` as JSON and prints its
row as one ``RESULT {json}`` line; anything else it prints is left to the log.
"""
import fnmatch
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from ..runtime.allocator import minor_faults
from ..runtime.compiling import compile_for_inference
from ..runtime.precision import DTYPES, autocast
from ..typing import HW
from .memory import KEEP_FREED_ENV, peak_tracker
from .rows import Measurement, dtype_label, latency, pool
from .timing import make_step, time_calls
from .zoo import build_model, config_label, init_model

DEFAULT_RESOLUTIONS = ('512x512', '800x1216', '1024x1024', '1600x2432')
RESULT_PREFIX = 'RESULT '


def parse_hw(text: str) -> HW:
    """'800x1216' -> (800, 1216); a ValueError (argparse's type error) says what is wrong."""
    import argparse
    try:
        h, w = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not HxW, e.g. 800x1216') from None
    if h <= 0 or w <= 0:
        raise argparse.ArgumentTypeError(f'{text!r}: sides must be positive')
    return h, w


# a job's compiled path -> compile_for_inference's sizes
COMPILED_PATHS = {'compiled': 'dynamic', 'compiled-static': 'static'}
# how a reduced-dtype job gets its dtype: torch.autocast around the float32 model, or the model and its input
# cast to it (``model.to(dtype)``, inference only)
CASTS = ('autocast', 'model')


@dataclass
class Job:
    """One measurement: ``model`` is the row's label (a zoo name, or a config's label when
    ``config`` is given); ``threads`` None keeps torch's default; ``dtype`` 'fp32', or 'bf16' / 'fp16' for
    the step in that dtype: under ``torch.autocast`` (``cast`` 'autocast', rows labelled ``model+dtype``) or
    with the model and its input cast to it (``cast`` 'model', inference, rows labelled ``model+dtype-model``);
    ``flops`` also counts the architecture's FLOPs of one forward (inference rows) for the share of the GEMM
    rate; ``path`` 'eager', or 'compiled' / 'compiled-static' (inference:
    :func:`inline_dense.runtime.compiling.compile_for_inference` with dynamic / static sizes, the first call
    compiles and is timed apart); ``profile`` also profiles one more inference step for the share of its time
    outside GEMM-class ops (:mod:`.op_share`)."""
    model: str
    height: int
    width: int
    mode: str = 'infer'
    device: str = 'cpu'
    batch: int = 1
    warmup: int = 2
    runs: int = 5
    threads: int | None = None
    config: str | None = None
    dtype: str = 'fp32'
    flops: bool = False
    path: str = 'eager'
    profile: bool = False
    cast: str = 'autocast'

    @property
    def name(self) -> str:
        """The row's model label: 'inline-swin-t', 'inline-swin-t+bf16' under autocast, 'inline-swin-t+bf16-model'
        for the model cast to bf16, '+compiled' on the compiled path."""
        name = self.model if self.dtype == 'fp32' else f'{self.model}+{dtype_label(self.dtype, self.cast)}'
        return name if self.path == 'eager' else f'{name}+{self.path}'

    @property
    def label(self) -> str:
        """'model@HxW:mode', the name ``--skip`` globs match and the progress bar shows."""
        return f'{self.name}@{self.height}x{self.width}:{self.mode}'

    def row(self, threads: int, error: str = '') -> Measurement:
        """An empty row for this job (filled in by :func:`measure_job`, or left as an error row)."""
        return Measurement(self.name, self.height, self.width, self.mode, self.device, self.batch,
                           threads, error=error, dtype=self.dtype, path=self.path,
                           cast=self.cast if self.dtype != 'fp32' else 'autocast')

    def error_row(self, error: str) -> dict[str, Any]:
        return self.row(self.threads or 0, error).to_dict()


def plan_jobs(entries: Sequence[tuple[str, str | None]], resolutions: Sequence[HW],
              modes: Sequence[str], skip: Sequence[str] = (), **settings: Any) -> list[Job]:
    """Every (entry, resolution, mode) but those whose label matches a ``skip`` glob.

    ``entries``: (label, config or None) as :func:`~inline_dense.analysis.zoo.model_entries`
    gives them; ``settings``: the other :class:`Job` fields (device, batch, warmup, ...).
    """
    jobs = []
    for name, config in entries:
        for h, w in resolutions:
            for mode in modes:
                job = Job(name, h, w, mode, config=config and os.path.abspath(config), **settings)
                if not any(fnmatch.fnmatch(job.label, pat) for pat in skip):
                    jobs.append(job)
    return jobs


def measure_job(job: Job) -> Measurement:
    """Builds the model, then times ``job.runs`` steps after ``job.warmup`` and records the
    peak memory and the minor page faults per step, in this process (a compiled job: the first call, which
    compiles, is timed apart before the warm-up)."""
    if job.threads:
        torch.set_num_threads(job.threads)
    device = torch.device(job.device)
    result = job.row(torch.get_num_threads())
    torch.manual_seed(0)
    model = build_model(None if job.config else job.model, job.config)
    init_model(model)
    model.to(device)
    x = torch.randn(job.batch, 3, job.height, job.width, device=device)
    cast_model = job.cast == 'model' and job.dtype != 'fp32'
    if cast_model:
        if job.mode != 'infer':
            raise ValueError('a model cast to a reduced dtype is measured in inference: use --modes infer')
        model.to(DTYPES[job.dtype])
        x = x.to(DTYPES[job.dtype])
    if job.path in COMPILED_PATHS:
        if job.mode != 'infer':
            raise ValueError('the compiled path is for inference: measure it with --modes infer')
        if not compile_for_inference(model, sizes=COMPILED_PATHS[job.path]):
            raise RuntimeError('not compiled (no C++ compiler for inductor)')
    step = make_step(model, x, job.mode)
    if job.dtype != 'fp32' and not cast_model:
        step = autocast_step(step, device, DTYPES[job.dtype])
    if job.path in COMPILED_PATHS:
        t0 = time.perf_counter()
        step()
        result.compile_s = time.perf_counter() - t0
    tracker = peak_tracker(device)
    with tracker:
        time_calls(step, job.warmup, 0, device)
        faults = minor_faults()
        times, cpu = time_calls(step, 0, job.runs, device)
        result.faults_per_pass = (minor_faults() - faults) / job.runs
    if job.profile and job.mode == 'infer':
        from .op_share import non_gemm_share
        result.non_gemm_share = non_gemm_share(step, warmup=0).non_gemm_share
    if job.flops and job.mode == 'infer':
        from .flops import count_flops
        result.gflop = 2 * count_flops(model, x).total / 1e9
    result.times_ms = [round(t, 3) for t in times]
    result.median_ms, result.throughput = latency(times, job.batch)
    result.cpu_ms = statistics.median(cpu)
    result.peak_mib = tracker.peak / 2 ** 20
    result.memory_method = tracker.method
    return result


def autocast_step(step: Callable[[], None], device: torch.device, dtype: torch.dtype) -> Callable[[], None]:
    """``step`` under ``torch.autocast(device, dtype)``."""
    def cast_step() -> None:
        with autocast(device, dtype):
            step()
    return cast_step


def measure(model_name: str, height: int, width: int, mode: str = 'infer', device: str = 'cpu',
            batch: int = 1, warmup: int = 2, runs: int = 5, threads: int | None = None,
            config: str | None = None) -> Measurement:
    """:func:`measure_job` by keywords; with ``config`` the row is labelled by the config."""
    label = model_name if config is None else config_label(config)
    return measure_job(Job(label, height, width, mode, device, batch, warmup, runs, threads, config))


def run_in_subprocess(job: Job, timeout: float = 3600, keep_freed: bool = True,
                      worker: str = 'inline_dense.analysis.worker') -> dict[str, Any]:
    """The job's row from a fresh ``python -m <worker>`` process (default the model zoo's); an error
    row when it crashed, was killed or ran past ``timeout`` seconds. ``keep_freed``: the worker keeps freed
    memory (the tools' default allocator, :func:`inline_dense.runtime.allocator.tool_default`)."""
    cmd = [sys.executable, '-m', worker, json.dumps(asdict(job))]
    env = dict(os.environ, **KEEP_FREED_ENV) if keep_freed else None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return job.error_row(f'timed out after {timeout:.0f}s')
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    why = 'killed (out of memory?)' if proc.returncode in (-9, 137) else f'exit code {proc.returncode}'
    return job.error_row(f'{why}: ' + ' | '.join(tail))


def run_sweep(jobs: Sequence[Job], rounds: int = 1, timeout: float = 3600, keep_freed: bool = True,
              on_start: Callable[[str], None] | None = None,
              on_done: Callable[[], None] | None = None,
              worker: str = 'inline_dense.analysis.worker') -> list[dict[str, Any]]:
    """Runs every job ``rounds`` times, interleaved (all jobs, then all again, ...), each in
    its own subprocess, and returns one pooled row per job in the order given.

    ``on_start(label)`` / ``on_done()`` are called around each run (for a progress bar); ``worker``:
    the module each subprocess runs (:func:`run_in_subprocess`).
    """
    per_job: dict[str, list[dict[str, Any]]] = {job.label: [] for job in jobs}
    for _ in range(rounds):
        for job in jobs:
            if on_start is not None:
                on_start(job.label)
            per_job[job.label].append(run_in_subprocess(job, timeout, keep_freed, worker))
            if on_done is not None:
                on_done()
    return [pool(rows) for rows in per_job.values()]
