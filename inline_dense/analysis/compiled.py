"""``torch.compile`` against eager: compile time, graphs compiled and speed-up per input size.

:func:`measure_compiled` compiles one model once with ``dynamic=True`` and runs it on several
input sizes in turn. For each size it reports the first call's time (the compile, for the
first size; a recompile shows up as a slow first call and one more graph), then the median
of eager and compiled steps. Modes are those of :func:`.timing.make_step`: 'infer' (forward
under no_grad) and 'train' (forward + backward of the outputs' sum).
"""
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from .timing import make_step, time_calls

Shape = tuple[int, int, int, int]


@dataclass
class CompileRow:
    """One input size of a compiled model, in a mode; times in ms except ``first_call_s``."""
    model: str
    mode: str
    backend: str
    shape: Shape
    first_call_s: float  # includes compiling when the size needs a graph
    graphs: int  # graphs compiled so far (1 after the first size: no recompile since)
    eager_ms: float
    compiled_ms: float

    @property
    def speedup(self) -> float:
        return self.eager_ms / self.compiled_ms

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), speedup=self.speedup)


def measure_compiled(name: str, model: nn.Module, shapes: Sequence[Shape], mode: str, backend: str = 'inductor',
                     warmup: int = 1, runs: int = 3) -> list[CompileRow]:
    """Eager vs ``torch.compile(model, backend=backend, dynamic=True)`` on each of ``shapes``."""
    from torch._dynamo.testing import CompileCounterWithBackend
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)
    compiled = torch.compile(model, backend=counter, dynamic=True)
    rows = []
    for shape in shapes:
        x = torch.randn(*shape)
        step = make_step(compiled, x, mode)
        t0 = time.perf_counter()
        step()
        first = time.perf_counter() - t0
        compiled_ms = sorted(time_calls(step, warmup, runs)[0])[runs // 2]
        eager_ms = sorted(time_calls(make_step(model, x, mode), warmup, runs)[0])[runs // 2]
        rows.append(CompileRow(name, mode, backend, tuple(shape), first, counter.frame_count, eager_ms, compiled_ms))
    return rows


def format_compile_rows(rows: Sequence[CompileRow]) -> str:
    """The rows as a text table."""
    lines = [f'{"model":<16} {"mode":<6} {"backend":<10} {"input":<14} {"1st call s":>10} {"graphs":>6} '
             f'{"eager ms":>9} {"compiled ms":>11} {"speed-up":>8}']
    for r in rows:
        lines.append(f'{r.model:<16} {r.mode:<6} {r.backend:<10} {"x".join(map(str, r.shape)):<14} '
                     f'{r.first_call_s:>10.1f} {r.graphs:>6} {r.eager_ms:>9.1f} {r.compiled_ms:>11.1f} '
                     f'{r.speedup:>7.2f}x')
    return '\n'.join(lines)
