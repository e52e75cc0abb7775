"""Result rows: one :class:`Measurement` per (model, resolution, mode), error rows, and the
pooling of several rounds of the same job into one row. Times in ms, memory in MiB."""
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Measurement:
    """One (model, resolution, mode) result; ``error`` is set, and the figures NaN, when it failed."""
    model: str
    height: int
    width: int
    mode: str
    device: str
    batch: int
    threads: int
    times_ms: list[float] = field(default_factory=list)
    median_ms: float = math.nan
    cpu_ms: float = math.nan  # median process CPU time per step, all threads
    throughput: float = math.nan  # images per second
    peak_mib: float = math.nan
    memory_method: str = ''
    error: str = ''
    dtype: str = 'fp32'  # 'bf16' / 'fp16': the step ran in that dtype (see cast)
    gflop: float = math.nan  # the architecture's FLOPs of one forward (2 per MAC), inference rows
    path: str = 'eager'  # 'compiled' / 'compiled-static': inline_dense.runtime.compiling (inference)
    compile_s: float = math.nan  # compiled rows: the first call (the compile), seconds
    faults_per_pass: float = math.nan  # minor page faults per timed step (median)
    non_gemm_share: float = math.nan  # profiler: share of self CPU time outside GEMM-class ops (inference rows)
    cast: str = 'autocast'  # a bf16 / fp16 row: under torch.autocast, or 'model' (the model cast to its dtype)

    @property
    def pixels(self) -> int:
        return self.height * self.width

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d['pixels'] = self.pixels
        return d


def dtype_label(dtype: str, cast: str = 'autocast') -> str:
    """A row's dtype as its label shows it: 'bf16' under autocast, 'bf16-model' for a model cast to bf16."""
    return f'{dtype}-model' if cast == 'model' and dtype != 'fp32' else dtype


def latency(times_ms: Sequence[float], batch: int) -> tuple[float, float]:
    """(median ms per step, images per second at that median)."""
    median = statistics.median(times_ms)
    return median, batch * 1e3 / median


def pool(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Merges the rounds of one job: all times pooled, median of them, median peak memory.

    A job that failed in every round gives its first error row.
    """
    good = [r for r in results if not r.get('error')]
    if not good:
        return results[0]
    merged = dict(good[0])
    merged['times_ms'] = [t for r in good for t in r['times_ms']]
    merged['median_ms'], merged['throughput'] = latency(merged['times_ms'], merged['batch'])
    merged['peak_mib'] = statistics.median(r['peak_mib'] for r in good)
    merged['cpu_ms'] = statistics.median(r['cpu_ms'] for r in good)
    for key in ('faults_per_pass', 'non_gemm_share', 'compile_s'):  # rows of older runs may lack them
        values = [r[key] for r in good if r.get(key) is not None and r[key] == r[key]]
        merged[key] = statistics.median(values) if values else math.nan
    merged['peak_mib_rounds'] = [round(r['peak_mib'], 1) for r in good]
    merged['median_ms_rounds'] = [round(r['median_ms'], 2) for r in good]
    return merged
