"""FLOP and parameter counting that sees every matrix product.

Hook-based counters (mmcv's, fvcore's layer tables) only know module types such
as ``nn.Linear`` and ``nn.Conv2d``: the ``@`` products inside attention are
missed, and a counter that models "attention" as a quadratic layer is wrong for
InLine attention, whose products are linear in the tokens. This counter works at
the ATen level instead, with torch's ``FlopCounterMode``: every ``mm``/``addmm``/
``bmm``/``baddbmm``/convolution/scaled-dot-product-attention call that a forward pass
makes is counted with the shapes it really ran with, plus (``custom_mapping``) the
token reductions (``sum``/``mean``) and the CPU flavours of fused attention.

Unit: multiply-accumulates (MACs), reported as "FLOPs" as in the Swin, PVT and
InLine papers and in fvcore/mmengine. Elementwise work (norms, activations,
softmax, scaling) is not counted; a reduction counts one per element summed.

InLine attention is counted for its textbook algorithm (``forward_reference``:
q, k, v projections, ``K^T V`` and ``q @ ctx`` per head, the means, the 3x3
depthwise residual, the tap MLP, the output projection), which is the
architecture's cost; ``executed=True`` counts what the default fast path runs
instead (see ``InLineAttention.forward_folded``).
"""
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from ..runtime import inline_impl

aten = torch.ops.aten
ATTENTION_WORDS = ('Attention', 'MSA')  # class names that count as "attention" in the breakdown
Inputs = torch.Tensor | Sequence[Any]


def _reduction_flops(self_shape: Sequence[int], *args: Any, out_shape: Any = None, **kwargs: Any) -> int:  # noqa: ARG001
    """A token sum/mean: one multiply-accumulate per element summed (torch counts 2 FLOPs a MAC)."""
    return 2 * prod(self_shape)


def _sdpa_flops(query: Sequence[int], key: Sequence[int], value: Sequence[int], *args: Any,
                out_shape: Any = None, **kwargs: Any) -> int:  # noqa: ARG001
    """2 * MACs of softmax(q k^T) v for q (..., L, E), k (..., S, E), v (..., S, Ev)."""
    length, e, s_len, ev = query[-2], query[-1], key[-2], value[-1]
    return 2 * prod(query[:-2]) * length * s_len * (e + ev)


def custom_mapping() -> dict[Any, Callable[..., int]]:
    """What ``FlopCounterMode`` adds to torch's own table here (formulas take shapes).

    InLine attention's token means (of x, k and v) are part of its cost and torch does not
    count reductions; torch's table also lacks the CPU flavours of fused attention
    (``F.scaled_dot_product_attention`` on the CPU dispatches to them), so window / SR
    softmax attention would count as zero.
    """
    table: dict[Any, Callable[..., int]] = {aten.sum: _reduction_flops, aten.mean: _reduction_flops}
    for name in ('_scaled_dot_product_flash_attention_for_cpu',
                 '_scaled_dot_product_fused_attention_overrideable'):
        packet = getattr(aten, name, None)
        if packet is not None and packet not in flop_registry:
            table[packet] = _sdpa_flops
    return table


@dataclass
class FlopReport:
    """Counted multiply-accumulates.

    ``total``: all MACs; ``by_op``: per ATen op; ``attention``: MACs inside modules whose
    class name contains 'Attention' or 'MSA' (projections included); ``params``: parameters.
    """
    total: int = 0
    by_op: dict[str, int] = field(default_factory=dict)
    attention: int = 0
    params: int = 0

    @property
    def gflops(self) -> float:
        return self.total / 1e9


def _outer_attention_names(model: nn.Module) -> list[str]:
    """Names, as ``FlopCounterMode`` keys them ('Root.sub.attn'), of the attention modules
    that are not inside another attention module (so nothing is counted twice)."""
    root = type(model).__name__
    outer: list[str] = []
    for fqn, module in model.named_modules():  # parents come before their children
        inside = any(o == '' or fqn.startswith(o + '.') for o in outer)
        if not inside and any(word in type(module).__name__ for word in ATTENTION_WORDS):
            outer.append(fqn)
    return [f'{root}.{fqn}' if fqn else root for fqn in outer]


def count_flops(model: nn.Module, inputs: Inputs, executed: bool = False,
                **forward_kwargs: Any) -> FlopReport:
    """Counts the MACs of one ``model(*inputs, **forward_kwargs)`` call, under ``torch.no_grad``.

    Args:
        model: any module; it is not modified (every InLine attention in it, whatever the
            backbone, runs its reference path only for the duration of the call unless ``executed``).
        inputs: a tensor or a sequence of positional arguments.
        executed: count the ops the default (fast) path executes instead of the
            architecture's textbook algorithm.
    """
    args = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    # torch's counter replaced a hand-written dispatch mode: same counts to the MAC (README
    # models at 224, 800x1216, 1600x2432, per op and inside attention), ~0.1 s more per count.
    counter = FlopCounterMode(display=False, custom_mapping=custom_mapping())
    with torch.no_grad(), inline_impl(model, None if executed else 'reference'), counter:
        model(*args, **forward_kwargs)
    counts = counter.get_flop_counts()
    # Every formula gives an even number (2 per MAC), so halving the sums is exact.
    by_op = {str(op).replace('aten.', ''): flops // 2 for op, flops in counts.get('Global', {}).items() if flops}
    attention = sum(sum(counts.get(name, {}).values()) for name in _outer_attention_names(model)) // 2
    return FlopReport(total=sum(by_op.values()), by_op=by_op, attention=attention, params=count_params(model))


def count_params(model: nn.Module) -> int:
    """Number of parameters (trainable or frozen), shared tensors counted once
    (``nn.Module.parameters`` yields each parameter once, however many modules hold it)."""
    return sum(p.numel() for p in model.parameters())


def inline_attention_macs(n: int, c: int, heads: int, qkv_bias: bool = True) -> dict[str, int]:  # noqa: ARG001
    """Closed-form MACs of one InLine attention over n tokens and c channels, per image.

    The terms of ``forward_reference``; handy for tables and to see what dominates.
    """
    d = c // heads
    return {
        'qkv projection': 3 * n * c * c,
        'K^T V (per head n*d*d)': n * c * d,
        'q @ ctx (per head n*d*d)': n * c * d,
        'mean(k) mean(v)^T': c * d,
        'token means of x, k, v': 3 * n * c,
        '3x3 depthwise residual': 9 * n * c,
        'tap MLP': c * c // heads + 9 * c * c // heads,
        'output projection': n * c * c,
    }
