"""Step 2: the stand-in's multi-scale deformable attention (``ms_deform_attn_forward`` /
``_backward`` of ``inline_dense.ops.ext``, reached through mmcv's ``MultiScaleDeformableAttnFunction``,
the path mmcv takes on CUDA) against mmcv's pure ``multi_scale_deformable_attn_pytorch`` on the
device, in float32: the forward within 1e-5 and the gradients for value, sampling locations and
attention weights within 1e-4 (each at the scale of the reference's largest entry, as
``tests/ops/test_mmcv_ops_deform_attn.py`` compares them), at random level layouts and at DINO's
encoder layout; that repeated calls on one layout read it off the device once (no device sync per
call: counted by ``torch.cuda.set_sync_debug_mode``); then both implementations' forward + backward
time and peak memory there."""
import random
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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


LAYERS = 6
"""Calls on one layout in the sync check: a DINO encoder's layers, each a forward and a backward."""


@contextmanager
def counted_syncs(device: torch.device) -> Iterator[list[str]]:
    """Yields a list that gets the message of each device sync inside the block: torch's sync
    debug mode warns at each synchronising CUDA call. Nothing is counted on a CPU."""
    syncs: list[str] = []
    if device.type != 'cuda':
        yield syncs
        return
    torch.cuda.synchronize(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        torch.cuda.set_sync_debug_mode('warn')
        try:
            yield syncs
        finally:
            torch.cuda.set_sync_debug_mode('default')
    syncs.extend(str(w.message) for w in caught if 'synchroniz' in str(w.message))


def layout_sync_row(row: dict[str, Any], inputs: list[torch.Tensor]) -> None:
    """The stand-in's forward and backward (``inline_dense.ops.ext``, as mmcv calls them) ``LAYERS``
    times on one pair of layout tensors after a first call on it: no layout read and no device sync in
    those calls (the first call reads the layout, once), then one call on a copy of the layout: one read."""
    from inline_dense.ops import ext, ms_deform_attn
    value, shapes, start, loc, weights = inputs
    grad_out = torch.ones(value.shape[0], loc.shape[1], value.shape[2] * value.shape[3], device=value.device)

    def layer(shapes: torch.Tensor, start: torch.Tensor) -> None:
        ext.ms_deform_attn_forward(value, shapes, start, loc, weights, im2col_step=64)
        ext.ms_deform_attn_backward(value, shapes, start, loc, weights, grad_out, torch.zeros_like(value),
                                    torch.zeros_like(loc), torch.zeros_like(weights), im2col_step=64)
    layer(shapes, start)
    reads = ms_deform_attn.layout_reads
    with counted_syncs(value.device) as syncs:
        for _ in range(LAYERS):
            layer(shapes, start)
    row.update(calls=2 * LAYERS, layout_reads=ms_deform_attn.layout_reads - reads,
               syncs=len(syncs) if value.device.type == 'cuda' else 'not counted on a CPU')
    layer(shapes.clone(), start.clone())
    row['new_layout_reads'] = ms_deform_attn.layout_reads - reads - row['layout_reads']
    problems = [f'{row["layout_reads"]} layout reads' if row['layout_reads'] else '',
                f'{len(syncs)} device syncs (first: {syncs[0][:200]})' if syncs else '',
                f'a new layout read {row["new_layout_reads"]} times' if row['new_layout_reads'] != 1 else '']
    if any(problems):
        row.update(ok=False, error=f'{2 * LAYERS} calls on one layout: ' + '; '.join(p for p in problems if p))


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
    with recorded(emit, device, name=f'ms_deform_attn layout reads and syncs, DINO encoder {h}x{w}',
                  dtype='float32', input=f'{h}x{w}') as row:
        layout_sync_row(row, inputs)
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
