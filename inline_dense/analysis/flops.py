"""FLOP and parameter counting that sees every matrix product.

Hook-based counters (mmcv's, fvcore's layer tables) only know module types such
as ``nn.Linear`` and ``nn.Conv2d``: the ``@`` products inside attention are
missed, and a counter that models "attention" as a quadratic layer is wrong for
InLine attention, whose products are linear in the tokens. This counter works at
the ATen level instead: every ``mm``/``addmm``/``bmm``/``baddbmm``/convolution/
scaled-dot-product-attention call that a forward pass makes is counted with the
shapes it really ran with, plus token reductions (``sum``/``mean``).

Unit: multiply-accumulates (MACs), reported as "FLOPs" as in the Swin, PVT and
InLine papers and in fvcore/mmengine. Elementwise work (norms, activations,
softmax, scaling) is not counted; a reduction counts one per element summed.

InLine attention is counted for its textbook algorithm (``forward_reference``:
q, k, v projections, ``K^T V`` and ``q @ ctx`` per head, the means, the 3x3
depthwise residual, the tap MLP, the output projection), which is the
architecture's cost; ``executed=True`` counts what the default fast path runs
instead (see ``InLineAttention.forward_folded``).
"""
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple, Union

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

aten = torch.ops.aten


def _shape(t: Any) -> Any:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else t


def _sdpa_flops(query: Any, key: Any, value: Any, *args: Any, **kwargs: Any) -> int:
    """2 * MACs of softmax(q k^T) v for q (B, h, L, E), k (B, h, S, E), v (B, h, S, Ev)."""
    q, k, v = _shape(query), _shape(key), _shape(value)
    batch = 1
    for s in q[:-2]:
        batch *= s
    length, e, s_len, ev = q[-2], q[-1], k[-2], v[-1]
    return 2 * batch * length * s_len * (e + ev)


def _registry_formula(packet: Any) -> Callable[..., int]:
    formula = flop_registry[packet]

    def count(*args: Any, out: Any = None, **kwargs: Any) -> int:
        return formula(*args, out_val=out, **kwargs)
    return count


def _formulas() -> Dict[Any, Callable[..., int]]:
    """ATen op packet -> function(args..., out=..., **kwargs) giving 2 * MACs."""
    table: Dict[Any, Callable[..., int]] = {p: _registry_formula(p) for p in flop_registry
                                            if isinstance(p, torch._ops.OpOverloadPacket)}
    # torch's own table lacks the CPU flavours of fused attention (F.scaled_dot_product_attention
    # on CPU dispatches to them), so window / SR softmax attention would count as zero.
    for name in ('_scaled_dot_product_flash_attention_for_cpu',
                 '_scaled_dot_product_fused_attention_overrideable'):
        packet = getattr(aten, name, None)
        if packet is not None and packet not in table:
            table[packet] = lambda q, k, v, *a, out=None, **kw: _sdpa_flops(q, k, v)
    return table


_REDUCTIONS = {aten.sum, aten.mean}
ATTENTION_WORDS = ('Attention', 'MSA')  # class names that count as "attention" in the breakdown


@dataclass
class FlopReport:
    """Counted multiply-accumulates.

    ``total``: all MACs; ``by_op``: per ATen op; ``attention``: MACs inside modules whose
    class name contains 'Attention' or 'MSA' (projections included); ``params``: parameters.
    """
    total: int = 0
    by_op: Dict[str, int] = field(default_factory=lambda: defaultdict(int))
    attention: int = 0
    params: int = 0

    @property
    def gflops(self) -> float:
        return self.total / 1e9


class MacCounter(TorchDispatchMode):
    """Dispatch mode that counts MACs of every op it sees (see module docstring).

    ``in_attention`` is a depth counter the module hooks maintain; ops seen while it is
    positive are also added to ``report.attention``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.report = FlopReport()
        self.in_attention = 0
        self._formulas = _formulas()

    def __torch_dispatch__(self, func: Any, types: Any, args: Tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        macs = 0
        if packet in self._formulas:
            macs = int(self._formulas[packet](*args, out=out, **kwargs)) // 2
        elif packet in _REDUCTIONS and isinstance(args[0], torch.Tensor):
            macs = args[0].numel()
        if macs:
            self.report.total += macs
            self.report.by_op[str(packet).replace('aten.', '')] += macs
            if self.in_attention:
                self.report.attention += macs
        return out


@contextmanager
def _attention_tracking(model: nn.Module, counter: MacCounter) -> Iterator[None]:
    handles = []

    def enter(module: nn.Module, args: Any) -> None:
        counter.in_attention += 1

    def leave(module: nn.Module, args: Any, output: Any) -> None:
        counter.in_attention -= 1

    for module in model.modules():
        if any(word in type(module).__name__ for word in ATTENTION_WORDS):
            handles.append(module.register_forward_pre_hook(enter))
            handles.append(module.register_forward_hook(leave))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


@contextmanager
def _textbook_inline(model: nn.Module, enabled: bool) -> Iterator[None]:
    """Runs every InLine attention of ``model`` on its reference path while active."""
    from ..models.inline_attention import InLineAttention
    changed: List[Tuple[nn.Module, bool]] = []
    if enabled:
        for module in model.modules():
            if isinstance(module, InLineAttention):
                changed.append((module, module.fused))
                module.fused = False
    try:
        yield
    finally:
        for module, fused in changed:
            module.fused = fused


Inputs = Union[torch.Tensor, Sequence[Any]]


def count_flops(model: nn.Module, inputs: Inputs, executed: bool = False,
                **forward_kwargs: Any) -> FlopReport:
    """Counts the MACs of one ``model(*inputs, **forward_kwargs)`` call, under ``torch.no_grad``.

    Args:
        model: any module; it is not modified (InLine attention is switched to its
            reference path only for the duration of the call unless ``executed``).
        inputs: a tensor or a sequence of positional arguments.
        executed: count the ops the default (fast) path executes instead of the
            architecture's textbook algorithm.
    """
    args = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    counter = MacCounter()
    with torch.no_grad(), _textbook_inline(model, not executed), _attention_tracking(model, counter):
        with counter:
            model(*args, **forward_kwargs)
    report = counter.report
    report.by_op = dict(report.by_op)
    report.params = count_params(model)
    return report


def count_params(model: nn.Module) -> int:
    """Number of parameters (trainable or frozen), shared tensors counted once."""
    seen = {}
    for p in model.parameters():
        seen[id(p)] = p.numel()
    return sum(seen.values())


def inline_attention_macs(n: int, c: int, heads: int, qkv_bias: bool = True) -> Dict[str, int]:
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
