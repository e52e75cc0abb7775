"""One InLine attention layer against its qkv and output projections alone, and the steps
of its optimisation in between (``tools/benchmark.py --layer [--ablation]``)."""
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from ..families.swin.window_attention import ShiftWindowMSA
from ..layers.inline_attention import InLineAttention
from ..typing import HW
from .timing import time_calls

FLOOR = 'qkv+proj'


class _ReferenceChannelsLast(nn.Module):
    """Ablation: the textbook path with only the depthwise residual done channels-last."""

    def __init__(self, attn: nn.Module) -> None:
        super().__init__()
        self.attn = attn

    def forward(self, x: torch.Tensor, hw: HW) -> torch.Tensor:
        a = self.attn
        q, k, v = a.qkv(x).chunk(3, dim=-1)
        out = a.global_attention(q, k, v, None)
        taps = a.residual(x.mean(1).unsqueeze(-1))
        v = v.contiguous()
        res = torch.stack([a.local_residual_nhwc(v[i], taps[i], torch.zeros_like(v[i, 0]), hw)
                           for i in range(x.shape[0])])
        return a.proj(out + res)


def inline_copy(source: nn.Module, impl: str) -> nn.Module:
    """An eval-mode ``InLineAttention`` with ``source``'s weights, built with ``impl``."""
    attn = InLineAttention(source.embed_dims, source.num_heads, impl=impl).eval()
    attn.load_state_dict(source.state_dict())
    return attn


def layer_variants(tokens_hw: HW, dims: int, heads: int, batch: int = 1, window: int = 7,
                   ablation: bool = False) -> dict[str, Callable[[], Any]]:
    """Callables for the single-layer comparison at a token grid, all on the same input.

    'qkv+proj': the layer's two projections alone (the floor); 'inline': InLineAttention
    as shipped; 'inline-reference': its textbook path; 'window-softmax': the Swin softmax
    window attention of the same width (our ShiftWindowMSA, unshifted). ``ablation`` adds
    the steps in between: 'reference+channels-last' (textbook, depthwise residual
    channels-last) and 'folded-keys' (folded path, ctx always from projected keys).
    """
    torch.manual_seed(0)
    x = torch.randn(batch, tokens_hw[0] * tokens_hw[1], dims)
    inline = InLineAttention(dims, heads).eval()
    reference = inline_copy(inline, 'reference')
    window_attn = ShiftWindowMSA(dims, heads, window).eval()

    def floor() -> Any:
        inline.qkv(x)
        return inline.proj(x)

    table = {
        FLOOR: floor,
        'inline': lambda: inline(x, tokens_hw),
        'inline-reference': lambda: reference(x, tokens_hw),
        'window-softmax': lambda: window_attn(x, tokens_hw),
    }
    if ablation:
        channels_last = _ReferenceChannelsLast(reference)
        keys = inline_copy(inline, 'folded_keys')
        table['reference+channels-last'] = lambda: channels_last(x, tokens_hw)
        table['folded-keys'] = lambda: keys(x, tokens_hw)
    return table


def measure_layer(tokens_hw: HW, dims: int, heads: int, rounds: int = 15, warmup: int = 2,
                  batch: int = 1, variants: Sequence[str] | None = None, ablation: bool = False,
                  progress: Callable[[int], None] | None = None
                  ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and process-CPU times (ms) of each variant, interleaved round by round so that
    load drifts hit all variants alike; ``progress(1)`` is called after each round."""
    table = layer_variants(tokens_hw, dims, heads, batch, ablation=ablation)
    names = list(variants) if variants else list(table)
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    with torch.no_grad():
        for name in names:
            time_calls(table[name], warmup, 0)
        for _ in range(rounds):
            for name in names:
                w, c = time_calls(table[name], 0, 1)
                wall[name] += w
                cpu[name] += c
            if progress is not None:
                progress(1)
    return wall, cpu


def layer_rows(wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> dict[str, dict[str, Any]]:
    """Per variant: median wall and CPU ms, and both as multiples of the projections alone."""
    floor, cpu_floor = statistics.median(wall[FLOOR]), statistics.median(cpu[FLOOR])
    rows = {}
    for name, times in wall.items():
        med, cmed = statistics.median(times), statistics.median(cpu[name])
        rows[name] = dict(median_ms=med, times_ms=[round(t, 3) for t in times], vs_projections=med / floor,
                          cpu_ms=cmed, cpu_vs_projections=cmed / cpu_floor)
    return rows
