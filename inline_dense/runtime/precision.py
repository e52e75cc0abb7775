"""Which reduced precision a device multiplies in natively, chosen the same way by every tool.

CPU: bfloat16 when the processor has bf16 matrix instructions (Intel AMX ``amx_bf16``, AVX512-BF16
``avx512_bf16`` on Intel Cooper Lake and later and AMD Zen 4 and later), as its ``/proc/cpuinfo``
flags or oneDNN (``torch.backends.mkldnn``) tell. Without them torch emulates bfloat16 and
autocast runs several times *slower* than float32, so ``--amp`` falls back to float32 there,
in one printed line. CUDA: float16 (autocast's default; the training tools add a loss scale).

    dtype = amp_dtype('cpu')            # torch.bfloat16, or None (float32) with one line printed
    with autocast(device, dtype): ...   # a no-op context when dtype is None
"""
import contextlib
import sys
from collections.abc import Callable
from functools import cache
from typing import TextIO

import torch

BF16_CPU_FLAGS = ('amx_bf16', 'avx512_bf16')
DTYPES = {'fp32': torch.float32, 'bf16': torch.bfloat16, 'fp16': torch.float16}


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of the first processor in ``/proc/cpuinfo`` (empty elsewhere)."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('flags'):
                    return frozenset(line.split(':', 1)[1].split())
    except OSError:
        pass
    return frozenset()


def mkldnn_bf16() -> bool:
    """oneDNN's own verdict (torch >= 2.1), False where torch cannot tell."""
    probe: Callable[[], bool] | None = getattr(torch.ops.mkldnn, '_is_mkldnn_bf16_supported', None)
    if probe is None or not torch.backends.mkldnn.is_available():
        return False
    try:
        return bool(probe())
    except (RuntimeError, AttributeError):
        return False


def native_bf16_cpu() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (AMX or AVX512-BF16)."""
    return bool(cpu_flags().intersection(BF16_CPU_FLAGS)) or mkldnn_bf16()


def has_amx() -> bool:
    """Whether this CPU has Intel AMX tiles for bfloat16 (``amx_bf16``)."""
    return 'amx_bf16' in cpu_flags()


def cpu_bf16_unit() -> str:
    """'AMX', 'AVX512-BF16' or 'none (emulated)': what the benchmark prints next to its rates."""
    if has_amx():
        return 'AMX'
    if native_bf16_cpu():
        return 'AVX512-BF16'
    return 'none (emulated)'


def device_type(device: str | torch.device) -> str:
    return torch.device(device).type


def amp_dtype(device: str | torch.device = 'cpu', stream: TextIO | None = None) -> torch.dtype | None:
    """The autocast dtype ``--amp`` uses on ``device``: float16 on CUDA, bfloat16 on a CPU with native
    bf16; None (run float32) on a CPU without it, after saying so in one line on ``stream`` (stderr)."""
    kind = device_type(device)
    if kind == 'cuda':
        return torch.float16
    if kind == 'cpu' and native_bf16_cpu():
        return torch.bfloat16
    print(f'[amp] this {kind.upper()} has no native bfloat16 (no amx_bf16 / avx512_bf16 flag, oneDNN says no): '
          f'--amp runs float32, which is faster here than emulated bfloat16', file=stream or sys.stderr, flush=True)
    return None


def parse_dtype(name: str) -> torch.dtype:
    """'fp32' | 'bf16' | 'fp16' -> the torch dtype; a ValueError names the choices."""
    if name not in DTYPES:
        raise ValueError(f'unknown dtype {name!r}; use one of {list(DTYPES)}')
    return DTYPES[name]


def check_dtype(dtype: torch.dtype, device: str | torch.device) -> str | None:
    """Why ``dtype`` cannot run natively on ``device`` (a one-line message), or None when it can."""
    kind = device_type(device)
    if dtype == torch.float32:
        return None
    if kind == 'cpu' and dtype == torch.float16:
        return 'fp16 autocast on the CPU is emulated (no fp16 matrix unit used by torch); use bf16 or fp32'
    if kind == 'cpu' and dtype == torch.bfloat16 and not native_bf16_cpu():
        return 'this CPU has no native bfloat16 (no amx_bf16 / avx512_bf16 flag); use fp32'
    return None


def autocast(device: str | torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[object]:
    """``torch.autocast`` for ``dtype`` on ``device``, or a no-op context for None / float32."""
    if dtype is None or dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type(device), dtype=dtype)


def trained_scale_(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """``model`` with its linear and convolution weights re-drawn at the scale of trained ones (Xavier
    uniform, biases of std 0.1), in place. A fresh init (std 0.02) makes every block's contribution tiny
    next to the patch embedding's, and so every rounding error look small."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Linear, torch.nn.Conv1d, torch.nn.Conv2d)):
                fan_out, fan_in = m.weight.shape[0], m.weight[0].numel()
                bound = (6.0 / (fan_in + fan_out)) ** 0.5
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) * 2 * bound - bound)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    return model


def relative_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref||, both read as float32."""
    return ((out.float() - ref.float()).norm() / ref.float().norm()).item()


@torch.no_grad()
def autocast_errors(model: torch.nn.Module, x: torch.Tensor, dtype: torch.dtype) -> list[float]:
    """Relative L2 error of each output of ``model(x)`` (a tensor or a sequence of them, e.g. a backbone's
    stages) under autocast in ``dtype`` against the same model in float32 (inference, no gradients)."""
    def outputs(value: object) -> list[torch.Tensor]:
        return [value] if isinstance(value, torch.Tensor) else list(value)  # type: ignore[call-overload]

    ref = outputs(model(x))
    with autocast(x.device, dtype):
        out = outputs(model(x))
    return [relative_l2(o, r) for o, r in zip(out, ref)]
