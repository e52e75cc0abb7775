"""Step 3: InLine attention on the device against the CPU float32 reference, for every
``impl`` in float32 and under bfloat16 / float16 autocast (output and input-gradient errors,
finiteness), at the stage-1 size of a 1600x2688 image (~270k tokens); then the time of each
``impl`` at the stage-1 and stage-3 sizes, and whether ``auto`` picks the fastest."""
import copy

import torch
from torch import nn

from inline_dense.layers.inline_attention import IMPLS, InLineAttention

from .measure import Emit, all_finite, max_abs, recorded, rel_l2, release, time_step
from .plan import HW, CheckPlan

DTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}
# relative L2 error allowed against the float32 CPU reference: float32 (other summation order;
# cuDNN may use TF32 in convolutions), bfloat16 (8 mantissa bits) and float16 (11 bits), as
# tests/layers/test_amp.py allows one layer
TOL = {'float32': 1e-3, 'bfloat16': 2e-2, 'float16': 4e-3}


def trained_scale_layer(channels: int, heads: int) -> InLineAttention:
    """An InLine layer with weights at the scale of trained ones (Xavier, biases of std 0.1);
    a fresh init (std 0.02) makes every activation tiny and every error look small."""
    torch.manual_seed(0)
    layer = InLineAttention(channels, heads)
    for m in layer.modules():
        if isinstance(m, (nn.Linear, nn.Conv1d)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.normal_(m.bias, std=0.1)
    return layer


def feature_tokens(batch: int, hw: HW, channels: int) -> torch.Tensor:
    """(B, H*W, C) unit-variance tokens around a per-channel mean, as real feature maps have one
    (it makes the sums over tokens grow with N)."""
    g = torch.Generator().manual_seed(1)
    mean = torch.randn(1, 1, channels, generator=g)
    return mean + torch.randn(batch, hw[0] * hw[1], channels, generator=g)


def forward_backward(layer: nn.Module, x: torch.Tensor, hw: HW, cotangent: torch.Tensor,
                     dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, d(output . cotangent)/dx), under autocast when ``dtype`` is not float32."""
    x = x.detach().requires_grad_(True)
    with torch.autocast(x.device.type, dtype=dtype, enabled=dtype != torch.float32):
        out = layer(x, hw)
    (out.float() * cotangent).sum().backward()
    return out.detach(), x.grad


def accuracy_rows(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    channels, heads, hw = plan.attn_error
    layer = trained_scale_layer(channels, heads)
    x = feature_tokens(1, hw, channels)
    cotangent = torch.randn(x.shape, generator=torch.Generator().manual_seed(2))
    ref_layer = copy.deepcopy(layer)
    ref_layer.impl = 'reference'
    ref_out, ref_grad = forward_backward(ref_layer, x, hw, cotangent, torch.float32)
    dev_layer, xd, cd = layer.to(device), x.to(device), cotangent.to(device)
    for impl in IMPLS:
        dev_layer.impl = impl
        for dname, dtype in DTYPES.items():
            with recorded(emit, device, name=f'{impl} {dname}', impl=impl, dtype=dname,
                          tokens=hw[0] * hw[1], channels=channels) as row:
                out, grad = forward_backward(dev_layer, xd, hw, cd, dtype)
                finite = all_finite(out, grad)
                row.update(out_rel_err=rel_l2(out, ref_out), out_max_abs_err=max_abs(out, ref_out),
                           grad_rel_err=rel_l2(grad, ref_grad), finite=finite)
                row['ok'] = finite and max(row['out_rel_err'], row['grad_rel_err']) <= TOL[dname]
                if not row['ok']:
                    row['error'] = f'not finite, or relative error above {TOL[dname]}'
                del out, grad
    release(device)


def impl_times(layer: InLineAttention, x: torch.Tensor, hw: HW, mode: str, plan: CheckPlan,
               device: torch.device) -> dict[str, float]:
    """Median ms of each impl, bfloat16 autocast; ``mode`` 'infer' (forward, no grad) or 'train'."""
    times = {}
    for impl in IMPLS:
        layer.impl = impl

        def step() -> None:
            with torch.autocast(device.type, dtype=torch.bfloat16):
                if mode == 'infer':
                    with torch.no_grad():
                        layer(x, hw)
                else:
                    layer(x, hw).float().sum().backward()
                    x.grad = None
        times[impl] = time_step(step, plan.warmup, plan.runs, device)['median_ms']
    return times


def timing_rows(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    for shape, (channels, heads, hw) in plan.attn_shapes.items():
        layer = trained_scale_layer(channels, heads).to(device)
        x = feature_tokens(plan.batch, hw, channels).to(device).requires_grad_(True)
        for mode in ('infer', 'train'):
            with recorded(emit, device, name=f'{shape} {mode}', shape=shape, mode=mode, batch=plan.batch,
                          tokens=hw[0] * hw[1], channels=channels) as row:
                times = impl_times(layer, x, hw, mode, plan, device)
                explicit = {k: v for k, v in times.items() if k != 'auto'}
                fastest = min(explicit, key=explicit.get)
                picks = 'folded_gram' if layer.use_gram(hw[0] * hw[1]) else 'folded_keys'
                row.update({f'{k}_ms': v for k, v in times.items()})
                row.update(fastest=fastest, auto_picks=picks, auto_is_fastest=picks == fastest,
                           auto_vs_fastest=round(times['auto'] / explicit[fastest], 3))
        del layer, x
        release(device)


def run(plan: CheckPlan, emit: Emit) -> None:
    accuracy_rows(plan, emit)
    timing_rows(plan, emit)
