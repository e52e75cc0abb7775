"""The stand-in's multi-scale deformable attention (``ms_deform_attn_forward`` / ``_backward``)
is mmcv's ``multi_scale_deformable_attn_pytorch``, at shapes and level layouts drawn at random
per run (the seed is printed; ``INLINE_TEST_SEED=<seed>`` replays a run), and refuses bad inputs."""
import os
import random
import time

import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (installs the mmcv._ext finder)
from inline_dense.openmmlab.mmcv_ops import mmcv_ext

pytestmark = pytest.mark.skipif(not getattr(mmcv_ext(), 'IS_STAND_IN', False),
                                reason='a test of the mmcv-lite stand-in; compiled mmcv here')

SEED = int(os.environ.get('INLINE_TEST_SEED', time.time_ns() % 2**31))
print(f'test_mmcv_ops_deform_attn: seed {SEED} (INLINE_TEST_SEED={SEED} replays it)')


def _draw(rng: random.Random, dtype=torch.float64, device='cpu'):
    """Random (value, spatial_shapes, level_start_index, locations, weights) of a random layout;
    locations reach up to 0.3 outside [0, 1], where the samples read zero padding."""
    levels = rng.randint(1, 5)
    shapes = torch.tensor([[rng.randint(1, 13), rng.randint(1, 13)] for _ in range(levels)], device=device)
    sizes = shapes[:, 0] * shapes[:, 1]
    start = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    batch, queries, heads, dims, points = (rng.randint(1, 3), rng.randint(1, 17), rng.randint(1, 4),
                                           rng.randint(1, 9), rng.randint(1, 5))
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    value = torch.randn(batch, int(sizes.sum()), heads, dims, generator=gen, dtype=dtype)
    loc = torch.rand(batch, queries, heads, levels, points, 2, generator=gen, dtype=dtype) * 1.6 - 0.3
    weights = torch.rand(batch, queries, heads, levels, points, generator=gen, dtype=dtype).softmax(-1)
    return [t.to(device) for t in (value, shapes, start, loc, weights)]


def _pure(value, shapes, start, loc, weights):
    from mmcv.ops.multi_scale_deform_attn import multi_scale_deformable_attn_pytorch
    return multi_scale_deformable_attn_pytorch(value, shapes, loc, weights)


def _through_ext(value, shapes, start, loc, weights):
    """The autograd Function mmcv uses on CUDA, which calls the stand-in on any device."""
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction
    return MultiScaleDeformableAttnFunction.apply(value, shapes, start, loc, weights, 64)


def _compare(inputs, rtol, atol):
    value, shapes, start, loc, weights = inputs
    leaves = [t.clone().requires_grad_(True) for t in (value, loc, weights)]
    ref = _pure(leaves[0], shapes, start, leaves[1], leaves[2])
    grad_out = torch.randn_like(ref)
    ref_grads = torch.autograd.grad(ref, leaves, grad_out)
    leaves = [t.clone().requires_grad_(True) for t in (value, loc, weights)]
    out = _through_ext(leaves[0], shapes, start, leaves[1], leaves[2])
    grads = torch.autograd.grad(out, leaves, grad_out)
    scale = max(1.0, float(ref.detach().abs().max()))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-5 * scale)
    for name, got, want in zip(('value', 'sampling_locations', 'attention_weights'), grads, ref_grads):
        # d/d(location) grows with the level's size (a location of 1 spans the map): compare at that scale
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol * max(1.0, float(want.abs().max())),
                                   msg=lambda m, name=name: f'grad of {name}: {m}')


@pytest.mark.parametrize('draw', range(12))
def test_matches_the_pure_function_at_random_layouts_in_float64(draw):
    rng = random.Random(SEED * 1000 + draw)
    _compare(_draw(rng), rtol=0, atol=1e-9)


@pytest.mark.parametrize('draw', range(6))
def test_matches_the_pure_function_at_random_layouts_in_float32(draw):
    rng = random.Random(SEED * 1000 + 100 + draw)
    _compare(_draw(rng, torch.float32), rtol=0, atol=1e-4)


def _on_grid(rng: random.Random, inputs):
    """``inputs`` with each location moved, per level and axis, onto that level's pixel grid: a
    pixel centre ((i + 0.5) / size, where grid_sample's corner choice flips) or a pixel edge (i / size)."""
    value, shapes, start, loc, weights = inputs
    loc = loc.clone()
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    for level, (h, w) in enumerate(shapes.tolist()):
        for axis, size in ((0, w), (1, h)):
            index = torch.randint(-1, size + 1, loc[..., level, :, axis].shape, generator=gen).to(loc.dtype)
            centre = torch.rand(index.shape, generator=gen) < 0.7
            loc[..., level, :, axis] = (index + centre.to(loc.dtype) * 0.5) / size
    return [value, shapes, start, loc, weights]


def _skewed(rng: random.Random, dtype):
    """A random layout where every level is 1 x N or N x 1 (N up to 40), locations off the grid."""
    inputs = _draw(rng, dtype)
    levels = inputs[1].shape[0]
    shapes = torch.tensor([[1, rng.randint(1, 40)] if rng.random() < 0.5 else [rng.randint(1, 40), 1]
                           for _ in range(levels)])
    sizes = shapes[:, 0] * shapes[:, 1]
    value = torch.randn(inputs[0].shape[0], int(sizes.sum()), *inputs[0].shape[2:], dtype=dtype)
    start = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    return [value, shapes, start, inputs[3], inputs[4]]


def _compare_elementwise(inputs, rtol=1e-4, atol=1e-5, atol_of_max=0.0):
    """Forward and every gradient equal the pure function's element by element (tolerance
    ``atol`` + ``atol_of_max`` x the largest entry of the reference: 0 by default, no rescaling)."""
    value, shapes, start, loc, weights = inputs
    results = []
    for fn in (_pure, _through_ext):
        leaves = [t.clone().requires_grad_(True) for t in (value, loc, weights)]
        out = fn(leaves[0], shapes, start, leaves[1], leaves[2])
        grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(0), dtype=out.dtype)
        results.append((out, *torch.autograd.grad(out, leaves, grad_out)))
    for name, got, want in zip(('output', 'value', 'sampling_locations', 'attention_weights'), *reversed(results)):
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol + atol_of_max * float(want.detach().abs().max()),
                                   msg=lambda m, name=name: f'{name}: {m}')


@pytest.mark.parametrize('draw', range(8))
def test_every_gradient_matches_on_the_pixel_grid(draw):
    rng = random.Random(SEED * 1000 + 200 + draw)
    _compare_elementwise(_on_grid(rng, _draw(rng, torch.float32)))


@pytest.mark.parametrize('draw', range(6))
def test_every_gradient_matches_off_the_grid_elementwise(draw):
    rng = random.Random(SEED * 1000 + 300 + draw)
    _compare_elementwise(_draw(rng, torch.float32))


@pytest.mark.parametrize('draw', range(6))
def test_every_gradient_matches_at_one_pixel_wide_levels(draw):
    rng = random.Random(SEED * 1000 + 400 + draw)
    inputs = _skewed(rng, torch.float32)
    _compare_elementwise(inputs)
    _compare_elementwise(_on_grid(rng, inputs))


def test_gradcheck_in_float64_through_the_ext_functions():
    rng = random.Random(SEED * 1000 + 500)
    value, shapes, start, loc, weights = _draw(rng)
    # bilinear sampling has kinks at pixel centres: keep every location 0.2 pixel or more away from one
    loc = loc.clone()
    for level, (h, w) in enumerate(shapes.tolist()):
        for axis, size in ((0, w), (1, h)):
            pixel = (loc[..., level, :, axis] * size - 0.5).floor()
            loc[..., level, :, axis] = (pixel + 0.7 + 0.6 * torch.rand(pixel.shape, dtype=loc.dtype)) / size
    leaves = [t.clone().requires_grad_(True) for t in (value, loc, weights)]
    assert torch.autograd.gradcheck(lambda v, s, a: _through_ext(v, shapes, start, s, a), leaves,
                                    eps=1e-6, atol=1e-5, rtol=1e-4)


def test_the_ext_functions_write_the_compiled_conventions_buffers():
    value, shapes, start, loc, weights = _draw(random.Random(SEED + 7))
    ext = mmcv_ext()
    before = dict(ext.CALLS)
    out = ext.ms_deform_attn_forward(value, shapes, start, loc, weights, im2col_step=64)
    assert out.shape == (value.shape[0], loc.shape[1], value.shape[2] * value.shape[3])
    torch.testing.assert_close(out, _pure(value, shapes, start, loc, weights), rtol=0, atol=1e-9)
    grad_out = torch.randn_like(out)
    buffers = [torch.ones_like(value), torch.ones_like(loc), torch.ones_like(weights)]
    ext.ms_deform_attn_backward(value, shapes, start, loc, weights, grad_out, *buffers, im2col_step=64)
    leaves = [t.clone().requires_grad_(True) for t in (value, loc, weights)]
    want = torch.autograd.grad(_pure(leaves[0], shapes, start, leaves[1], leaves[2]), leaves, grad_out)
    for got, ref in zip(buffers, want):  # added into the buffers, as the kernel does
        torch.testing.assert_close(got - 1, ref, rtol=0, atol=1e-9)
    assert ext.CALLS['ms_deform_attn_forward'] == before.get('ms_deform_attn_forward', 0) + 1
    assert ext.CALLS['ms_deform_attn_backward'] == before.get('ms_deform_attn_backward', 0) + 1


def test_the_module_runs_on_the_stand_in_when_mmcv_takes_the_compiled_path(monkeypatch):
    """mmcv's MultiScaleDeformableAttention takes the ext path on CUDA; force it on CPU."""
    import mmcv.ops.multi_scale_deform_attn as msda
    torch.manual_seed(SEED)
    attn = msda.MultiScaleDeformableAttention(embed_dims=32, num_heads=4, num_levels=2, num_points=3,
                                              batch_first=True).eval()  # no dropout
    shapes = torch.tensor([[6, 5], [3, 3]])
    start = torch.tensor([0, 30])
    query = torch.randn(2, 39, 32)
    ref_points = torch.rand(2, 39, 2, 2)
    kw = dict(value=query, reference_points=ref_points, spatial_shapes=shapes, level_start_index=start)
    ref = attn(query, **kw)
    calls = mmcv_ext().CALLS['ms_deform_attn_forward']
    monkeypatch.setattr(msda, 'IS_CUDA_AVAILABLE', True)
    monkeypatch.setattr(torch.Tensor, 'is_cuda', property(lambda self: True))
    out = attn(query, **kw)
    monkeypatch.undo()
    assert mmcv_ext().CALLS['ms_deform_attn_forward'] == calls + 1
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def _count_layout_reads(monkeypatch) -> list:
    """The spatial_shapes tensor of each read of a layout (``.tolist()``: a device sync on CUDA)."""
    from inline_dense.ops import ms_deform_attn as stand_in
    reads, read = [], stand_in._read_layout
    monkeypatch.setattr(stand_in, '_read_layout',
                        lambda op, shapes, *rest: reads.append(shapes) or read(op, shapes, *rest))
    return reads


def test_the_layout_is_read_once_per_pair_of_layout_tensors(monkeypatch):
    """A detector builds spatial_shapes / level_start_index once per forward and passes them to every
    layer, forward and backward: they are read and checked once, not at each of those calls."""
    reads = _count_layout_reads(monkeypatch)
    value, shapes, start, loc, weights = _draw(random.Random(SEED + 13))

    def layers(shapes, start, count):  # ``count`` layers' forward and backward on one layout
        for _ in range(count):
            leaves = [t.clone().requires_grad_(True) for t in (value, loc, weights)]
            _through_ext(leaves[0], shapes, start, leaves[1], leaves[2]).sum().backward()

    layers(shapes, start, 6)
    assert reads == [shapes]
    layers(shapes.clone(), start.clone(), 6)  # a new pair (the next forward): its contents are unknown
    assert len(reads) == 2

    def model_forward():  # builds its layout, returns only the output: backward meets the saved tensors
        return _through_ext(value.clone().requires_grad_(True), shapes.clone(), start.clone(), loc, weights)
    for _ in range(3):
        model_forward().sum().backward()
    assert len(reads) == 5

    start.add_(1)  # changed in place: read again, and refused
    with pytest.raises(ValueError, match='does not match spatial_shapes'):
        layers(shapes, start, 1)
    start.sub_(1)
    layers(shapes, start, 1)
    assert len(reads) == 7
    with pytest.raises(ValueError, match='but value has'):  # a remembered layout still meets each value
        _through_ext(value[:, 1:].contiguous(), shapes, start, loc, weights)
    assert len(reads) == 7


def test_an_inference_tensor_layout_is_read_at_every_call(monkeypatch):
    """Inference tensors keep no version counter, so a change in place could not be seen."""
    reads = _count_layout_reads(monkeypatch)
    value, shapes, start, loc, weights = _draw(random.Random(SEED + 17))
    ext = mmcv_ext()
    with torch.inference_mode():
        shapes, start = shapes.clone(), start.clone()
        for _ in range(3):
            ext.ms_deform_attn_forward(value, shapes, start, loc, weights, im2col_step=64)
    assert len(reads) == 3


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert '\n' not in text, text
    assert type(err.value).__name__ == 'OpInputError', text
    return text


def test_refuses_bad_inputs_with_one_line_each():
    value, shapes, start, loc, weights = _draw(random.Random(SEED + 11))
    ext = mmcv_ext()
    cases = {
        'value must be (batch, num_keys': dict(value=value[0]),
        'value must be a floating-point': dict(value=value.long()),
        'spatial_shapes must be (num_levels, 2)': dict(shapes=shapes[:, :1]),
        'sampling_locations must be (batch': dict(loc=loc[..., 0]),
        'attention_weights must have shape': dict(weights=weights[..., :1].repeat_interleave(2, -1)
                                                  if weights.shape[-1] == 1 else weights[..., :1]),
        'but value has': dict(shapes=shapes + torch.tensor([1, 0])),
        'does not match spatial_shapes': dict(start=start + 1),
        'spatial_shapes must be int64': dict(shapes=shapes.int()),
        'level_start_index must be (num_levels,)': dict(start=start[None]),
        'sampling_locations is torch.float32 but value is torch.float64': dict(loc=loc.float()),
        'is on meta but value is on cpu': dict(weights=weights.to('meta')),
        'im2col_step must be a positive integer': dict(step=0),
    }
    for words, change in cases.items():
        args = dict(value=value, shapes=shapes, start=start, loc=loc, weights=weights, step=64)
        args.update(change)
        with pytest.raises(ValueError) as err:
            ext.ms_deform_attn_forward(args['value'], args['shapes'], args['start'], args['loc'], args['weights'],
                                       im2col_step=args['step'])
        assert words in _one_line(err), (words, str(err.value))
    with pytest.raises(ValueError) as err:
        ext.ms_deform_attn_backward(value, shapes, start, loc, weights, torch.zeros(1), torch.zeros_like(value),
                                    torch.zeros_like(loc), torch.zeros_like(weights), im2col_step=64)
    assert 'grad_output must have shape' in _one_line(err)


def _wide_layout(rng: random.Random, dtype=torch.float32):
    """Batch 2, 1-5 levels of random shapes up to 48 x 64 (each level 1 x N, N x 1 or h x w at random),
    more heads and points than :func:`_draw`; locations up to 0.3 outside [0, 1]."""
    levels = rng.randint(1, 5)
    rows = []
    for _ in range(levels):
        kind = rng.random()
        rows.append([1, rng.randint(1, 64)] if kind < 0.25 else [rng.randint(1, 48), 1] if kind < 0.5
                    else [rng.randint(1, 48), rng.randint(1, 64)])
    shapes = torch.tensor(rows)
    sizes = shapes[:, 0] * shapes[:, 1]
    start = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    batch, queries, heads, dims = 2, rng.randint(1, 40), rng.randint(1, 8), rng.choice((1, 8, 32))
    points = rng.randint(1, 4)
    gen = torch.Generator().manual_seed(rng.randrange(2**31))
    value = torch.randn(batch, int(sizes.sum()), heads, dims, generator=gen, dtype=dtype)
    loc = torch.rand(batch, queries, heads, levels, points, 2, generator=gen, dtype=dtype) * 1.6 - 0.3
    weights = torch.rand(batch, queries, heads, levels, points, generator=gen, dtype=dtype).softmax(-1)
    return [value, shapes, start, loc, weights]


@pytest.mark.parametrize('draw', range(8))
def test_every_gradient_matches_at_wide_random_layouts_on_and_off_the_grid(draw):
    rng = random.Random(SEED * 1000 + 600 + draw)
    inputs = _wide_layout(rng)
    # d/d(location) reaches hundreds at 64-pixel levels, where float32 rounding (the pure function's
    # own, against float64) is ~1e-6 of the largest entry; a wrong corner is off by the gradient itself
    _compare_elementwise(inputs, atol_of_max=1e-6)
    _compare_elementwise(_on_grid(rng, inputs), atol_of_max=1e-6)


@pytest.mark.parametrize('draw', range(4))
def test_bfloat16_inputs_match_the_pure_function_in_float32(draw):
    """bfloat16 runs in float32 inside and returns bfloat16: the pure function on the same numbers in
    float32, rounded to bfloat16, is the reference (on and off the grid, every gradient)."""
    rng = random.Random(SEED * 1000 + 700 + draw)
    inputs = _wide_layout(rng)
    for case in (inputs, _on_grid(rng, inputs)):
        value, shapes, start, loc, weights = case
        low = [t.to(torch.bfloat16) for t in (value, loc, weights)]
        leaves = [t.float().requires_grad_(True) for t in low]
        ref = _pure(leaves[0], shapes, start, leaves[1], leaves[2])
        grad_out = torch.randn(ref.shape, generator=torch.Generator().manual_seed(draw)).to(torch.bfloat16)
        want = (ref.detach(), *torch.autograd.grad(ref, leaves, grad_out.float()))
        leaves = [t.clone().requires_grad_(True) for t in low]
        out = _through_ext(leaves[0], shapes, start, leaves[1], leaves[2])
        got = (out, *torch.autograd.grad(out, leaves, grad_out))
        for name, g, w in zip(('output', 'value', 'sampling_locations', 'attention_weights'), got, want):
            assert g.dtype == torch.bfloat16, name
            torch.testing.assert_close(g.float(), w.to(torch.bfloat16).float(), rtol=1e-2,
                                       atol=1e-2 * max(1.0, float(w.abs().max())),
                                       msg=lambda m, name=name: f'{name}: {m}')
