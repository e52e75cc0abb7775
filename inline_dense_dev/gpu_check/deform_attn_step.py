"""Step 2: the stand-in's multi-scale deformable attention (``ms_deform_attn_forward`` /
``_backward`` of ``inline_dense.ops.ext``, reached through mmcv's ``MultiScaleDeformableAttnFunction``,
the path mmcv takes on CUDA) against mmcv's pure ``multi_scale_deformable_attn_pytorch`` on the
device, in float32: the forward within 1e-5 and the gradients for value, sampling locations and
attention weights within 1e-4 (each at the scale of the reference's largest entry, as
``tests/ops/test_mmcv_ops_deform_attn.py`` compares them), at random level layouts and at DINO's
encoder layout; then both implementations' forward + backward time and peak memory there."""
import random
from collections.abc import Callable
from typing import Any

import torch

from inline_dense.analysis.deform_attn import dino_inputs
from inline_dense.analysis.deform_attn import step as deform_step

from .measure import Emit, max_abs, recorded, release, time_step
from .plan import CheckPlan

FORWARD_TOL = 1e-5
GRAD_TOL = 1e-4
GRAD_NAMES = ('value', 'sampling_locations', 'attention_weights')


def random_layout(rng: random.Random, device: torch.device) -> list[torch.Tensor]:
    """(value, spatial_shapes, level_start_index, sampling_locations, attention_weights) of a
    random layout: 1-5 levels of 1-24 x 1-24, batch 1-2, 1-40 queries, 1-8 heads of 1-32
    channels, 1-4 points; locations up to 0.3 outside [0, 1] (the samples read zero padding)."""
    levels = rng.randint(1, 5)
    shapes = torch.tensor([[rng.randint(1, 24), rng.randint(1, 24)] for _ in range(levels)])
    sizes = shapes[:, 0] * shapes[:, 1]
    start = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    batch, queries, heads, dims, points = (rng.randint(1, 2), rng.randint(1, 40), rng.randint(1, 8),
                                           rng.randint(1, 32), rng.randint(1, 4))
    gen = torch.Generator().manual_seed(rng.randrange(2 ** 31))
    value = torch.randn(batch, int(sizes.sum()), heads, dims, generator=gen)
    loc = torch.rand(batch, queries, heads, levels, points, 2, generator=gen) * 1.6 - 0.3
    weights = torch.rand(batch, queries, heads, levels, points, generator=gen).softmax(-1)
    return [t.to(device) for t in (value, shapes, start, loc, weights)]


def outputs_and_grads(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor],
                      grad_out: torch.Tensor = None) -> dict[str, Any]:
    """``fn``'s output and the gradients of (output . grad_out) for value, locations, weights."""
    value, shapes, start, loc, weights = inputs
    leaves = [t.detach().clone().requires_grad_(True) for t in (value, loc, weights)]
    out = fn(leaves[0], shapes, start, leaves[1], leaves[2])
    if grad_out is None:
        grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
    grads = torch.autograd.grad(out, leaves, grad_out)
    return dict(out=out.detach(), grads=grads, grad_out=grad_out)


def pure(value, shapes, start, loc, weights) -> torch.Tensor:  # noqa: ARG001
    from mmcv.ops.multi_scale_deform_attn import multi_scale_deformable_attn_pytorch
    return multi_scale_deformable_attn_pytorch(value, shapes, loc, weights)


def stand_in(value, shapes, start, loc, weights) -> torch.Tensor:
    """mmcv's autograd Function of the compiled-op path, which calls ``mmcv._ext`` (the stand-in)."""
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction
    return MultiScaleDeformableAttnFunction.apply(value, shapes, start, loc, weights, 64)


def compare(inputs: list[torch.Tensor]) -> dict[str, float]:
    """Errors of the stand-in against the pure function, each over its allowed error: the
    forward's over 1e-5 x max(1, max |out|), each gradient's over 1e-4 x max(1, max |grad|)."""
    ref = outputs_and_grads(pure, inputs)
    got = outputs_and_grads(stand_in, inputs, ref['grad_out'])
    errors = dict(forward=max_abs(got['out'], ref['out']) /
                  (FORWARD_TOL * max(1.0, ref['out'].abs().max().item())))
    for name, g, r in zip(GRAD_NAMES, got['grads'], ref['grads']):
        errors[name] = max_abs(g, r) / (GRAD_TOL * max(1.0, r.abs().max().item()))
    return errors


def parity_row(row: dict[str, Any], cases: list[list[torch.Tensor]]) -> None:
    """The worst error (in units of its tolerance) of each compared quantity over ``cases``;
    ok when all are below 1."""
    worst = dict.fromkeys(('forward', *GRAD_NAMES), 0.0)
    failed = []
    for i, inputs in enumerate(cases):
        errors = compare(inputs)
        worst = {k: max(worst[k], errors[k]) for k in worst}
        if max(errors.values()) > 1:
            failed.append(i)
    row.update({f'{k}_err_over_tol': round(v, 4) for k, v in worst.items()})
    row.update(cases=len(cases), failed=len(failed), ok=not failed)
    if failed:
        row['error'] = f'cases {failed[:10]} outside the tolerance (forward 1e-5, gradients 1e-4)'


def run(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    h, w = plan.deform_size
    with recorded(emit, device, name=f'ms_deform_attn vs pure, {plan.deform_layouts} random layouts',
                  dtype='float32') as row:
        rng = random.Random(0)
        parity_row(row, [random_layout(rng, device) for _ in range(plan.deform_layouts)])
    with recorded(emit, device, name=f'ms_deform_attn vs pure, DINO encoder {h}x{w}', dtype='float32',
                  input=f'{h}x{w}') as row:
        inputs = dino_inputs(h, w, batch=1, device=str(device))
        row['keys'] = int(inputs[0].shape[1])
        parity_row(row, [inputs])
        del inputs
        release(device)
    inputs = dino_inputs(h, w, batch=plan.batch, device=str(device))
    times: dict[str, float] = {}
    for impl in ('pure', 'stand-in'):
        with recorded(emit, device, name=f'{impl} fwd+bwd, DINO encoder {h}x{w}', impl=impl, input=f'{h}x{w}',
                      batch=plan.batch, keys=int(inputs[0].shape[1]), dtype='float32') as row:
            row.update(time_step(lambda impl=impl: deform_step(impl, inputs), plan.warmup, plan.runs, device))
            times[impl] = row['median_ms']
        release(device)
    if len(times) == 2:
        with recorded(emit, device, name='stand-in / pure time') as row:
            row['ratio'] = round(times['stand-in'] / max(times['pure'], 1e-9), 3)
