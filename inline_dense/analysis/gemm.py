"""The machine's own matrix-multiply rate, the yardstick for a model's speed in a dtype.

A backbone's *share of the GEMM rate* is its useful work (the architecture's FLOPs,
:func:`inline_dense.analysis.flops.count_flops`, 2 per multiply-accumulate) divided by its time and
by what a large square GEMM reaches in the same dtype at the same thread count: 1.0 would be a
model that is nothing but large GEMMs.
"""
import time
from collections.abc import Sequence
from typing import Any

import torch

from ..runtime.precision import DTYPES, cpu_bf16_unit
from .rows import dtype_label

GEMM_SIZE = 1024


def gemm_gflops(dtype: torch.dtype, n: int = GEMM_SIZE, reps: int = 10, device: str = 'cpu') -> float:
    """Best of ``reps`` (n x n) @ (n x n) products in ``dtype``, in GFLOP/s (2 n^3 FLOPs each), after one
    warm-up product; at torch's current thread count."""
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    b = torch.randn(n, n, generator=g).to(device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    torch.mm(a, b, out=out)
    best = float('inf')
    for _ in range(reps):
        if device != 'cpu':
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        if device != 'cpu':
            torch.cuda.synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9


def gemm_rates(dtypes: Sequence[str] = ('fp32', 'bf16'), threads: int | None = None, n: int = GEMM_SIZE,
               reps: int = 10, device: str = 'cpu') -> dict[str, object]:
    """{'fp32': GFLOP/s, 'bf16': GFLOP/s, ..., 'threads', 'size', 'bf16_unit'} at ``threads`` (None: torch's
    current count, restored after)."""
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        rates: dict[str, object] = {name: round(gemm_gflops(DTYPES[name], n, reps, device), 1) for name in dtypes}
        rates.update(threads=torch.get_num_threads(), size=n,
                     bf16_unit=cpu_bf16_unit() if device == 'cpu' else 'cuda')
    finally:
        torch.set_num_threads(before)
    return rates


def format_rates(rates: dict[str, object]) -> str:
    """One line: 'GEMM 1024^3, 1 thread(s), bf16 unit AVX512-BF16: fp32 150.2 GFLOP/s, bf16 420.0 GFLOP/s (2.80x)'."""
    names = [k for k in DTYPES if k in rates]
    figures = ', '.join(f'{k} {rates[k]} GFLOP/s' for k in names)
    ratio = ''
    if 'fp32' in rates and 'bf16' in rates:
        ratio = f' (bf16 / fp32 {float(rates["bf16"]) / float(rates["fp32"]):.2f}x)'  # type: ignore[arg-type]
    return (f'GEMM {rates["size"]}^3, {rates["threads"]} thread(s), bf16 unit {rates["bf16_unit"]}: '
            f'{figures}{ratio}')


def share_of_rate(gflop: float, seconds: float, rate_gflops: float) -> float:
    """Fraction of the GEMM rate a model of ``gflop`` useful GFLOPs reaches in ``seconds``."""
    return gflop / seconds / rate_gflops


def share_rows(rows: list[dict[str, Any]], rates: dict[str, object]) -> list[dict[str, Any]]:
    """Per inference row with FLOPs: GFLOP, achieved GFLOP/s, share of its dtype's GEMM rate, and (for
    a reduced dtype or the compiled path) its time over the same model's eager fp32 row; also stored in each
    row."""
    fp32 = {(r['model'], r['height'], r['width']): r for r in rows
            if r.get('dtype', 'fp32') == 'fp32' and r.get('path', 'eager') == 'eager'}
    out = []
    for r in rows:
        if r.get('error') or r['mode'] != 'infer' or not r.get('gflop') or r['gflop'] != r['gflop']:
            continue
        dtype = r.get('dtype', 'fp32')
        seconds = r['median_ms'] / 1e3 / r['batch']
        rate = rates.get(dtype)
        r['gflops_per_s'] = r['gflop'] / seconds
        r['share_of_gemm'] = share_of_rate(r['gflop'], seconds, float(rate)) if rate else None  # type: ignore
        # one thread on a shared machine: the process CPU time leaves out the time it waited for a core
        cpu_s = r.get('cpu_ms', float('nan')) / 1e3 / r['batch']
        r['share_of_gemm_cpu'] = (share_of_rate(r['gflop'], cpu_s, float(rate))  # type: ignore
                                  if rate and r.get('threads') == 1 and cpu_s > 0 else None)
        path = r.get('path', 'eager')
        base = r['model'][:-len(path) - 1] if path != 'eager' else r['model']
        label = dtype_label(dtype, r.get('cast', 'autocast'))
        base = base[:-len(label) - 1] if dtype != 'fp32' else base
        ref = fp32.get((base, r['height'], r['width'])) if base != r['model'] else None
        r['time_vs_fp32'] = r['median_ms'] / ref['median_ms'] if ref and not ref.get('error') else None
        out.append(r)
    return out


def format_shares(rows: list[dict[str, Any]]) -> str:
    """The table of :func:`share_rows`' rows: ``non-GEMM`` is the profiler's share of the step's self time
    outside GEMM-class ops (:mod:`.op_share`), ``vs fp32`` the time over the eager fp32 row."""
    lines = [f'{"model":36s} {"input":>10s} {"dtype":>10s} {"path":>8s} {"GFLOP":>7s} {"ms":>9s} {"GFLOP/s":>8s} '
             f'{"of GEMM":>8s} {"(CPU t)":>8s} {"non-GEMM":>8s} {"vs fp32":>8s}']
    for r in rows:
        share = '-' if r.get('share_of_gemm') is None else f'{r["share_of_gemm"]:.2f}'
        share_cpu = '-' if r.get('share_of_gemm_cpu') is None else f'{r["share_of_gemm_cpu"]:.2f}'
        ratio = '-' if r.get('time_vs_fp32') is None else f'x{r["time_vs_fp32"]:.2f}'
        other = r.get('non_gemm_share')
        other_s = '-' if other is None or other != other else f'{other:.2f}'
        dtype = dtype_label(r.get('dtype', 'fp32'), r.get('cast', 'autocast'))
        lines.append(f'{r["model"]:36s} {r["height"]:>4d}x{r["width"]:<5d} {dtype:>10s} '
                     f'{r.get("path", "eager"):>8s} {r["gflop"]:7.1f} {r["median_ms"]:9.1f} {r["gflops_per_s"]:8.1f} '
                     f'{share:>8s} {share_cpu:>8s} {other_s:>8s} {ratio:>8s}')
    return '\n'.join(lines)
