"""mmcv's ``ms_deform_attn_forward`` / ``ms_deform_attn_backward`` (DINO, Deformable DETR,
Mask2Former) for the stand-in :mod:`inline_dense.ops.ext`: the bilinear corners of every level at
its own size, gathered by one ``embedding_bag`` (:func:`_ms_deform_attn`); gradients by hand
(:func:`_ms_deform_attn_grads`). The level layout is read off the device once per pair of layout
tensors, not once per call (``_LAYOUTS``)."""
import weakref

import torch
import torch.nn.functional as F
from torch import Tensor

from .checks import check_float, check_out, check_same_device, require

Layout = tuple[tuple[int, int], ...]
"""A level layout as Python numbers: (h, w) of each level."""

_MAX_LAYOUTS = 8
layout_reads = 0
"""How many times a layout was read off its device in this process (the GPU check counts them)."""
_LAYOUTS: dict[tuple[int, int], tuple[weakref.ref, weakref.ref, tuple[int, ...], Layout]] = {}
"""The layouts already read and found valid, by the ids of their (spatial_shapes, level_start_index)
tensors: a weak reference to each (an id is reused once its tensor is freed), their version
counters (bumped by any in-place change) and the layout read. A model builds its layout once per
forward and hands the same two tensors to every layer, forward and backward: one read per forward,
where one read per call meant one device sync per call on CUDA."""


def _check_ms_deform_attn(op: str, value: Tensor, spatial_shapes: Tensor, level_start_index: Tensor,
                          sampling_locations: Tensor, attention_weights: Tensor, im2col_step: int) -> Layout:
    """value (B, S, H, D); spatial_shapes (L, 2) int64 rows (h, w) with sum(h * w) == S;
    level_start_index (L,) int64, the exclusive cumulative sum of h * w; sampling_locations
    (B, Q, H, L, P, 2) floats; attention_weights (B, Q, H, L, P) floats, all on one device.

    Returns the layout as Python numbers. The two layout tensors are read (``.tolist()``, a device
    sync on CUDA) only when this pair of tensors, unchanged, has not been read before (``_LAYOUTS``)."""
    require(value.dim() == 4, f'{op}: value must be (batch, num_keys, num_heads, head_dims), got shape '
            f'{tuple(value.shape)}')
    check_float(op, 'value', value)
    batch, num_keys, heads, _ = value.shape
    require(spatial_shapes.dim() == 2 and spatial_shapes.shape[1] == 2 and spatial_shapes.shape[0] > 0,
            f'{op}: spatial_shapes must be (num_levels, 2) rows of (h, w), got shape {tuple(spatial_shapes.shape)}')
    levels = spatial_shapes.shape[0]
    require(sampling_locations.dim() == 6 and sampling_locations.shape[-1] == 2,
            f'{op}: sampling_locations must be (batch, num_queries, num_heads, num_levels, num_points, 2), '
            f'got shape {tuple(sampling_locations.shape)}')
    batch_q, queries, heads_q, levels_q, points, _ = sampling_locations.shape
    require((batch_q, heads_q, levels_q) == (batch, heads, levels),
            f'{op}: sampling_locations {tuple(sampling_locations.shape)} must have batch {batch}, num_heads '
            f'{heads} (from value) and num_levels {levels} (from spatial_shapes)')
    require(tuple(attention_weights.shape) == (batch, queries, heads, levels, points),
            f'{op}: attention_weights must have shape {(batch, queries, heads, levels, points)} to match '
            f'sampling_locations, got {tuple(attention_weights.shape)}')
    check_float(op, 'sampling_locations', sampling_locations)
    check_float(op, 'attention_weights', attention_weights)
    for name, t in (('sampling_locations', sampling_locations), ('attention_weights', attention_weights)):
        require(t.dtype == value.dtype, f'{op}: {name} is {t.dtype} but value is {value.dtype}; '
                'cast them to one dtype (mmcv.ops casts them to value\'s)')
    for name, t in (('spatial_shapes', spatial_shapes), ('level_start_index', level_start_index)):
        require(t.dtype == torch.long, f'{op}: {name} must be int64, got {t.dtype}; use .long()')
    check_same_device(op, ('value', value), ('spatial_shapes', spatial_shapes),
                      ('level_start_index', level_start_index), ('sampling_locations', sampling_locations),
                      ('attention_weights', attention_weights))
    require(level_start_index.shape == (levels,), f'{op}: level_start_index must be (num_levels,) = '
            f'({levels},) to match spatial_shapes, got shape {tuple(level_start_index.shape)}')
    require(int(im2col_step) > 0, f'{op}: im2col_step must be a positive integer, got {im2col_step}')
    return _layout(op, spatial_shapes, level_start_index, num_keys)


def _layout(op: str, spatial_shapes: Tensor, level_start_index: Tensor, num_keys: int) -> Layout:
    """The checked layout: remembered for this pair of tensors, unchanged since, or read and checked
    (:func:`_read_layout`) and remembered; ``num_keys`` checked against it either way."""
    key = (id(spatial_shapes), id(level_start_index))
    versions = _versions(spatial_shapes, level_start_index)
    known = _LAYOUTS.get(key)
    if (known is not None and versions is not None and known[0]() is spatial_shapes
            and known[1]() is level_start_index and known[2] == versions):
        _check_num_keys(op, known[3], num_keys)
        return known[3]
    layout = _read_layout(op, spatial_shapes, level_start_index, num_keys)
    if versions is not None:
        if len(_LAYOUTS) >= _MAX_LAYOUTS:
            del _LAYOUTS[next(iter(_LAYOUTS))]  # the oldest
        _LAYOUTS[key] = (weakref.ref(spatial_shapes), weakref.ref(level_start_index), versions, layout)
    return layout


def _versions(*tensors: Tensor) -> tuple[int, ...] | None:
    """The tensors' version counters; None for an inference tensor (it keeps none: read every call)."""
    if any(t.is_inference() for t in tensors):
        return None
    return tuple(t._version for t in tensors)


def _read_layout(op: str, spatial_shapes: Tensor, level_start_index: Tensor, num_keys: int) -> Layout:
    """Reads the layout off the device (one sync on CUDA) and checks it: positive sizes, ``num_keys``
    positions in all, ``level_start_index`` the cumulative sizes."""
    global layout_reads
    layout_reads += 1
    shapes = spatial_shapes.tolist()
    require(all(h > 0 and w > 0 for h, w in shapes), f'{op}: spatial_shapes must be positive, got {shapes}')
    layout = tuple((h, w) for h, w in shapes)
    _check_num_keys(op, layout, num_keys)
    sizes = [h * w for h, w in shapes]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    listed = level_start_index.tolist()
    require(listed == starts, f'{op}: level_start_index {listed} does not match spatial_shapes {shapes}; it must '
            f'be {starts} (0, then the cumulative h * w)')
    return layout


def _check_num_keys(op: str, layout: Layout, num_keys: int) -> None:
    positions = sum(h * w for h, w in layout)
    require(positions == num_keys, f'{op}: spatial_shapes {[list(s) for s in layout]} hold {positions} positions but '
            f'value has {num_keys} keys; value must be the levels flattened and concatenated')


def _grid_sample_pixel(grid: Tensor, size: Tensor) -> Tensor:
    """The pixel coordinate ``grid_sample`` (align_corners=False) computes from a grid coordinate in
    [-1, 1], rounded as its kernel rounds it: on CPU one fused multiply-add ``grid * size/2 + (size-1)/2``
    (``addcmul`` fuses it too; ``(grid + 1) * size / 2 - 0.5`` rounds some pixel centres to the other
    side), on CUDA ``((grid + 1) * size - 1) / 2``. The side decides the one-sided gradient there."""
    if grid.device.type == 'cpu':
        return torch.addcmul((size - 1) / 2, grid, size / 2)
    return ((grid + 1) * size - 1) / 2


def _ms_deform_attn_corners(value: Tensor, spatial_shapes: Tensor, layout: Layout, sampling_locations: Tensor,
                            attention_weights: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """The bilinear corners of every sampling point, as rows of ``value`` viewed as a (B*S*H, D) table.

    Returns (rows (B*Q*H, L*P*4) int, coefficients (B*Q*H, L*P*4), the parts the backward needs:
    (corner weights (B, Q, H, L, P, 4) zero where the corner lies outside its level, the corners
    inside their level (same shape, bool), fx, fy (B, Q, H, L, P), the bilinear fractions, and (L, 1)
    level widths and heights)).

    A corner's coefficient is its attention weight times its bilinear weight. The pixel coordinate
    is computed as ``grid_sample`` computes it on CPU, from the same grid ``2 * loc - 1`` as mmcv's
    ``multi_scale_deformable_attn_pytorch``, so that a location exactly on the pixel grid picks the same
    corners there (the gradient is one-sided at a pixel centre).
    """
    batch, keys, heads, _ = value.shape
    _, queries, _, levels, points, _ = sampling_locations.shape
    shapes = spatial_shapes.to(value.device)
    sizes = shapes[:, 0] * shapes[:, 1]
    starts = (sizes.cumsum(0) - sizes).view(levels, 1)
    height = shapes[:, 0].view(levels, 1).to(value.dtype)
    width = shapes[:, 1].view(levels, 1).to(value.dtype)
    grid = 2 * sampling_locations - 1
    # clamped where every corner is outside anyway
    ix = _grid_sample_pixel(grid[..., 0], width).clamp(min=-2).minimum(width + 1)
    iy = _grid_sample_pixel(grid[..., 1], height).clamp(min=-2).minimum(height + 1)
    x0f, y0f = ix.floor(), iy.floor()
    fx, fy = ix - x0f, iy - y0f
    # int32 rows where they fit (the corners reach 2 rows and columns past a level)
    index = torch.int32 if batch * (keys + 2 * max(w for _, w in layout) + 4) * heads < 2**31 else torch.long
    x0, y0 = x0f.to(index), y0f.to(index)
    w_int, h_int = shapes[:, 1].view(levels, 1).to(index), shapes[:, 0].view(levels, 1).to(index)
    x0_in, x1_in = (x0 >= 0) & (x0 < w_int), (x0 >= -1) & (x0 < w_int - 1)
    y0_in, y1_in = (y0 >= 0) & (y0 < h_int), (y0 >= -1) & (y0 < h_int - 1)
    inside = torch.stack((x0_in & y0_in, x1_in & y0_in, x0_in & y1_in, x1_in & y1_in), -1)  # nw, ne, sw, se
    gx, gy = 1 - fx, 1 - fy
    bilinear = torch.stack((gx * gy, fx * gy, gx * fy, fx * fy), -1).masked_fill_(~inside, 0)
    # row of (b, key, h) in value (B, S, H, D) viewed as (B*S*H, D); a corner outside reads row 0 with weight 0
    base = (torch.arange(batch, device=value.device, dtype=index).view(batch, 1, 1, 1, 1) * (keys * heads)
            + torch.arange(heads, device=value.device, dtype=index).view(1, 1, heads, 1, 1))
    nw = (starts.to(index) + y0 * w_int + x0) * heads + base
    rows = torch.stack((nw, nw + heads, nw + w_int * heads, nw + (w_int + 1) * heads), -1).masked_fill_(~inside, 0)
    coefficients = bilinear * attention_weights[..., None]
    per_bag = levels * points * 4
    return (rows.view(batch * queries * heads, per_bag), coefficients.view(batch * queries * heads, per_bag),
            (bilinear, inside, fx, fy, width, height))


def _ms_deform_attn(value: Tensor, spatial_shapes: Tensor, layout: Layout, sampling_locations: Tensor,
                    attention_weights: Tensor) -> Tensor:
    """mmcv's multi-scale deformable attention: each level sampled bilinearly at its own (h, w)
    with exact coordinates (zero outside it), weighted and summed.

    One ``embedding_bag`` over ``value`` viewed as a (B*S*H, D) table of rows (no copy of value):
    each (batch, query, head) is a bag of its L*P*4 bilinear corners, with coefficient attention
    weight x bilinear weight. A row is D contiguous numbers, where ``grid_sample`` on (B*H, D, h, w)
    reads each channel from another plane; a skewed level (1 x 600) costs its 600 keys.

    Args:
        value: (B, S, H, D), the L levels flattened (row-major) and concatenated along S.
        spatial_shapes: (L, 2) int64 rows (h, w) with sum(h * w) == S.
        layout: the same (h, w) of each level as Python numbers (:func:`_check_ms_deform_attn`).
        sampling_locations: (B, Q, H, L, P, 2), (x, y) in [0, 1] of each level; outside it the
            samples read zeros (``grid_sample``'s zero padding, align_corners=False).
        attention_weights: (B, Q, H, L, P).

    Returns:
        (B, Q, H * D).
    """
    batch, _, heads, dims = value.shape
    queries = sampling_locations.shape[1]
    rows, coefficients, _ = _ms_deform_attn_corners(value, spatial_shapes, layout, sampling_locations,
                                                    attention_weights)
    out = F.embedding_bag(rows, value.reshape(-1, dims), per_sample_weights=coefficients, mode='sum')
    return out.view(batch, queries, heads * dims)


_CHUNK = 2**18
"""Numbers gathered per chunk of the backward (1 MiB in float32: small enough to stay in cache)."""


def _ms_deform_attn_grads(value: Tensor, spatial_shapes: Tensor, layout: Layout, sampling_locations: Tensor,
                          attention_weights: Tensor, grad_output: Tensor, grad_value: Tensor) -> tuple[Tensor, Tensor]:
    """Adds d(out)/d(value) into ``grad_value`` ((B*S*H, D), value's dtype) and returns the
    gradients of sampling_locations and attention_weights, by hand (no second forward).

    Per corner c of a point: out += a * b_c * v_c, so d/dv_c = a * b_c * g, d/da = sum_c b_c <g, v_c>,
    and d/dfx (fx the x fraction) = a * ((1-fy) (G_ne - G_nw) + fy (G_se - G_sw)) with G_c = <g, v_c>
    (zero outside the level), times the level width for d/dx (loc in [0, 1]); likewise for y."""
    dims = value.shape[-1]
    rows, coefficients, (bilinear, inside, fx, fy, width, height) = _ms_deform_attn_corners(
        value, spatial_shapes, layout, sampling_locations, attention_weights)
    table = value.reshape(-1, dims)
    g = grad_output.reshape(rows.shape[0], dims)
    per_bag = rows.shape[1]
    dots = torch.empty_like(coefficients)  # <g, v_c> of each corner
    step = max(1, _CHUNK // (per_bag * dims))
    for i in range(0, rows.shape[0], step):
        chunk_rows = rows[i:i + step].reshape(-1).long()  # int32 indices take a slower path
        corners = table.index_select(0, chunk_rows).view(-1, per_bag, dims)
        g_chunk = g[i:i + step]
        dots[i:i + step] = torch.bmm(corners, g_chunk.unsqueeze(-1)).squeeze(-1)
        contributions = (coefficients[i:i + step].unsqueeze(-1) * g_chunk.unsqueeze(1)).view(-1, dims)
        grad_value.index_add_(0, chunk_rows, contributions.to(grad_value.dtype))
    dots = dots.view(bilinear.shape) * inside
    grad_weights = (dots * bilinear).sum(-1)
    nw, ne, sw, se = dots.unbind(-1)
    weights = attention_weights
    grad_x = weights * ((1 - fy) * (ne - nw) + fy * (se - sw)) * width
    grad_y = weights * ((1 - fx) * (sw - nw) + fx * (se - ne)) * height
    return torch.stack((grad_x, grad_y), -1), grad_weights


def _ms_deform_attn_work_dtype(value: Tensor) -> torch.dtype:
    # bfloat16 (and float16 on CPU) run in float32: the sums of L*P*4 corners and the gradients need it
    return torch.float32 if value.dtype == torch.bfloat16 or (
        value.dtype == torch.float16 and value.device.type == 'cpu') else value.dtype


def ms_deform_attn_forward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                           sampling_locations: Tensor, attention_weights: Tensor, *, im2col_step: int) -> Tensor:
    """Multi-scale deformable attention, (B, Q, H * D): the same function as mmcv's
    ``multi_scale_deformable_attn_pytorch`` (shapes in :func:`_ms_deform_attn`).

    ``im2col_step`` (how many images compiled mmcv processes at once) is checked, then unused.
    """
    layout = _check_ms_deform_attn('ms_deform_attn', value, value_spatial_shapes, value_level_start_index,
                                   sampling_locations, attention_weights, im2col_step)
    work = _ms_deform_attn_work_dtype(value)
    with torch.no_grad():
        out = _ms_deform_attn(value.to(work).contiguous(), value_spatial_shapes, layout,
                              sampling_locations.to(work), attention_weights.to(work))
    return out.to(value.dtype)


def ms_deform_attn_backward(value: Tensor, value_spatial_shapes: Tensor, value_level_start_index: Tensor,
                            sampling_locations: Tensor, attention_weights: Tensor, grad_output: Tensor,
                            grad_value: Tensor, grad_sampling_loc: Tensor, grad_attn_weight: Tensor, *,
                            im2col_step: int) -> None:
    """Adds the gradients w.r.t. value, sampling_locations and attention_weights into
    ``grad_value`` (B, S, H, D), ``grad_sampling_loc`` (B, Q, H, L, P, 2) and ``grad_attn_weight``
    (B, Q, H, L, P), given ``grad_output`` (B, Q, H * D), by hand (:func:`_ms_deform_attn_grads`):
    the corners are recomputed, not the forward (the compiled kernel also keeps nothing from its forward)."""
    op = 'ms_deform_attn (backward)'
    layout = _check_ms_deform_attn(op, value, value_spatial_shapes, value_level_start_index, sampling_locations,
                                   attention_weights, im2col_step)
    batch, _, heads, dims = value.shape
    queries = sampling_locations.shape[1]
    check_out(op, 'grad_output', grad_output, (batch, queries, heads * dims))
    check_out(op, 'grad_value', grad_value, tuple(value.shape))
    check_out(op, 'grad_sampling_loc', grad_sampling_loc, tuple(sampling_locations.shape))
    check_out(op, 'grad_attn_weight', grad_attn_weight, tuple(attention_weights.shape))
    check_float(op, 'grad_output', grad_output)
    check_same_device(op, ('value', value), ('grad_output', grad_output), ('grad_value', grad_value),
                      ('grad_sampling_loc', grad_sampling_loc), ('grad_attn_weight', grad_attn_weight))
    work = _ms_deform_attn_work_dtype(value)
    direct = grad_value.dtype == work and grad_value.is_contiguous()
    value_grad = grad_value if direct else torch.zeros(value.shape, dtype=work, device=value.device)
    grad_loc, grad_weights = _ms_deform_attn_grads(
        value.to(work).contiguous(), value_spatial_shapes, layout, sampling_locations.to(work),
        attention_weights.to(work), grad_output.to(work), value_grad.view(-1, value.shape[-1]))
    if not direct:
        grad_value.add_(value_grad.to(grad_value.dtype))
    grad_sampling_loc.add_(grad_loc.to(grad_sampling_loc.dtype))
    grad_attn_weight.add_(grad_weights.to(grad_attn_weight.dtype))
