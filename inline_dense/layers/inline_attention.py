"""InLine attention: injective linear attention with a local residual.

Per head, with ``s = head_dim ** -0.5``, tokens ``j = 1..N`` and kernel ``phi``
applied to queries and keys, InLine replaces softmax's division by a
*subtraction* that makes every query's weights sum to one::

    w_ij  = s/N * (q_i . k_j) - s/N * (q_i . mean(k)) + 1/N
    out_i = sum_j w_ij v_j
          = s * q_i^T (K^T V / N - mean(k) mean(v)^T) + mean(v)

The bracket is a (head_dim x head_dim) matrix, so the cost is linear in N.
A local residual is added: a 3x3 depthwise filter over V (on the H x W grid,
zero padding) whose 9 taps per channel an MLP predicts from the mean token.

Two evaluations of the same function are implemented, chosen by the constructor's
``impl`` (see ``IMPLS``). ``'reference'`` is the textbook one above. The folded ones
(identity phi only) regroup the products so that the (B, N, C) tensors q and, with
the token covariance, k are never formed (see ``forward_folded``); they run the same
few large GEMMs as the projections, which is what makes the layer cost little more
than its qkv and output projections. ``'auto'`` folds whenever folding applies.

Traced into a graph (``torch.compile``, ``torch.export`` and the ONNX exporter built on it,
TorchScript tracing) the layer keeps no size out of its input: the local residual is
written as nine shifted products (``depthwise3x3``) instead of one depthwise convolution
with ``groups = batch * channels`` per sample, and ``'auto'`` picks its context route with
``torch.cond`` on the symbolic token count (see ``folded_context``), so one graph serves every
batch size and resolution.

InLine-CSwin adds two things, both optional here: LePE (``lepe=True``, a 3x3 depthwise
conv with bias over v, added to the output; folded into the local residual's taps) and
a residual MLP that reads another tensor than the attention input (``residual_input``).
"""
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..typing import HW
from . import fused
from .tensor_utils import cast, check_heads, compiling_for_run, merge_heads, traced
from .tracing import fx_leaf

KERNELS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    'identity': lambda t: t,
    'relu': F.relu,
    'leakyrelu': F.leaky_relu,
    'exp': torch.exp,
}

IMPLS: dict[str, str] = {
    'auto': 'folded where it applies (identity phi, no attention dropout in training), with the cheaper '
            'context (token covariance or keys, by the number of tokens); else reference',
    'reference': 'the textbook evaluation: q, k, v formed, any phi',
    'folded_gram': 'folded, context always from the token covariance of x',
    'folded_keys': 'folded, context always from the keys',
}


def depthwise3x3(grid: torch.Tensor, taps: torch.Tensor) -> torch.Tensor:
    """3x3 depthwise filter (cross-correlation, zero padding) with per-sample taps, as nine
    shifted products: no convolution whose group count holds the batch size.

    grid (B, H, W, C), taps (B, C, 9) with tap ``t = 3 * row + col`` -> (B, H, W, C).
    Eagerly, one grouped convolution per sample is several times faster on the CPU. Under
    ``torch.compile`` (not an export) it is one depthwise convolution with ``groups = batch * channels``:
    inductor's loops over the nine products were several times slower than oneDNN's kernel.
    """
    b, h, w, c = grid.shape
    if compiling_for_run():
        maps = grid.permute(0, 3, 1, 2).reshape(1, b * c, h, w)
        out = F.conv2d(maps, taps.reshape(b * c, 1, 3, 3), padding=1, groups=b * c)
        return out.view(b, c, h, w).permute(0, 2, 3, 1)
    padded = F.pad(grid, (0, 0, 1, 1, 1, 1))
    # few graph nodes: one slice per row offset, one per tap; the taps laid out once as (9, B, 1, 1, C)
    rows = [padded[:, r:r + h] for r in range(3)]
    taps = taps.permute(2, 0, 1).reshape(9, b, 1, 1, c)
    out = rows[0][:, :, :w] * taps[0]
    for t in range(1, 9):
        row, col = t // 3, t % 3
        out = out + rows[row][:, :, col:col + w] * taps[t]
    return out


def bf16_autocast(x: torch.Tensor) -> bool:
    """Whether autocast to bfloat16 is on for ``x``'s device (eager code only: not scriptable)."""
    kind = x.device.type
    return torch.is_autocast_enabled(kind) and torch.get_autocast_dtype(kind) == torch.bfloat16


def token_count(x: torch.Tensor) -> torch.Tensor:
    """(B, N, C) -> (B, 1) float32 filled with N. Traced, as a reduction: a graph traced with a
    symbolic N keeps it symbolic (``torch.full(..., float(n))`` came out of the ONNX export as the
    constant of the export size). Eagerly a constant, which FLOP counts do not see as work."""
    if traced():
        return x.new_ones(()).expand(x.shape[0], x.shape[1], 1).sum(1, dtype=torch.float32)
    return torch.full((x.shape[0], 1), float(x.shape[1]), dtype=torch.float32, device=x.device)


def counted_tokens(x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """The token count (B, 1) float32 of x (B, N, C), or of the real tokens where ``keep`` (B, N, 1) float32
    marks them (at least 1).

    Each branch of a ``torch.cond`` counts again rather than closing over its caller's count: torch.onnx's
    first capture (``torch.export``, non-strict) traces sizes size-obliviously, under which a (1, 1) count
    taken into a branch comes in as (s, s) and fails to broadcast against the (1, C, C) Gram; every model
    exported from a batch of 1 then fell back to dynamo's capture, after logging two errors."""
    return token_count(x) if keep is None else keep.sum(1).clamp_min(1)


def masked_token_mean(x: torch.Tensor, valid_mask: torch.Tensor | None) -> torch.Tensor:
    """Mean over tokens of (B, N, C) -> (B, C), over valid tokens only when a (B, N) mask is given."""
    if valid_mask is None:
        return x.mean(1)
    w = valid_mask.to(x.dtype).unsqueeze(-1)
    return (x * w).sum(1) / w.sum(1).clamp_min(1)


@fx_leaf
class InLineAttention(nn.Module):
    """Global InLine attention over an H x W token grid.

    Args:
        embed_dims: channels C (head-major: channel = head * head_dim + d).
        num_heads: number of heads.
        qkv_bias: bias of the fused q | k | v projection.
        kernel: phi applied to q and k: 'identity' (all released models), 'relu',
            'leakyrelu' or 'exp'.
        attn_drop: the attention's dropout probability, a float as in the softmax attentions (which drop
            attention weights); InLine forms no weight matrix, so it drops the attention output before
            the local residual, as the authors' training code does.
        proj_drop: dropout after the output projection.
        impl: how the function is evaluated, one of ``IMPLS`` (all compute the same function;
            'auto' is the fastest; the others are for checks and benchmarks).
        lepe: add LePE, a 3x3 depthwise conv with bias over v (``get_v``), as InLine-CSwin does.
        num_prefix_tokens: tokens before the grid's (a ViT's cls token, as InLine-DeiT): they attend
            and are attended to like the others (N counts them, the residual MLP's mean includes them),
            but take no local residual, which filters the grid's tokens alone.

    Input ``x`` is (B, N, C) with ``N = P + H * W``: ``P = num_prefix_tokens``, then the grid in
    row-major order of ``hw_shape``;
    ``valid_mask`` (B, N) bool marks real (non-padded) tokens; ``residual_input`` (B, N, C),
    if given, is what the residual MLP averages instead of ``x``. Output (B, N, C).
    """

    def __init__(self, embed_dims: int, num_heads: int, qkv_bias: bool = True,
                 kernel: str = 'identity', attn_drop: float = 0.0, proj_drop: float = 0.0,
                 impl: str = 'auto', lepe: bool = False, num_prefix_tokens: int = 0) -> None:
        super().__init__()
        if lepe and num_prefix_tokens:
            raise ValueError('InLineAttention: LePE filters a grid and takes no prefix tokens; '
                             'use lepe=False or num_prefix_tokens=0.')
        if kernel not in KERNELS:
            raise ValueError(f"InLineAttention: unknown kernel {kernel!r}; use one of {sorted(KERNELS)}.")
        if impl not in IMPLS:
            raise ValueError(f'InLineAttention: unknown impl {impl!r}; use one of {list(IMPLS)}.')
        if impl.startswith('folded') and (kernel != 'identity' or attn_drop > 0):
            raise ValueError(f"InLineAttention: impl={impl!r} needs kernel='identity' and attn_drop=0 "
                             f"(got {kernel!r}, {attn_drop}); use impl='auto' or 'reference'.")
        self.head_dim = check_heads(embed_dims, num_heads, 'InLineAttention')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.scale = self.head_dim ** -0.5
        self.kernel = kernel
        self.qkv = nn.Linear(embed_dims, embed_dims * 3, bias=qkv_bias)
        # MLP from the mean token to 9 depthwise taps per channel: output 9c+t is tap t of channel c.
        self.residual = nn.Sequential(
            nn.Conv1d(embed_dims, embed_dims, 1, groups=num_heads),
            nn.GELU(),
            nn.Conv1d(embed_dims, embed_dims * 9, 1, groups=num_heads),
        )
        self.attn_drop = attn_drop
        self.get_v = nn.Conv2d(embed_dims, embed_dims, 3, padding=1, groups=embed_dims) if lepe else None
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        self.impl = impl
        self.num_prefix_tokens = num_prefix_tokens

    def extra_repr(self) -> str:
        prefix = f', num_prefix_tokens={self.num_prefix_tokens}' if self.num_prefix_tokens else ''
        return f'num_heads={self.num_heads}, kernel={self.kernel!r}, impl={self.impl!r}{prefix}'

    def forward(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None = None,
                residual_input: torch.Tensor | None = None) -> torch.Tensor:
        _b, n, _c = x.shape
        h, w = hw_shape
        if self.num_prefix_tokens + h * w != n:
            raise ValueError(f'InLineAttention: hw_shape {hw_shape} and {self.num_prefix_tokens} prefix tokens '
                             f'do not match {n} tokens.')
        if self.folds():
            out = self.forward_folded(x, hw_shape, valid_mask, residual_input)
        else:
            out = self.forward_reference(x, hw_shape, valid_mask, residual_input)
        if not torch.jit.is_scripting():  # the bias inside the GEMM in CPU inference (fused.linear)
            return self.proj_drop(fused.linear_module(out, self.proj))
        return self.proj_drop(self.proj(out))

    def phi(self, t: torch.Tensor) -> torch.Tensor:
        """The kernel ``KERNELS[self.kernel]`` (spelled out: TorchScript keeps no functions as attributes)."""
        if self.kernel == 'relu':
            return F.relu(t)
        if self.kernel == 'leakyrelu':
            return F.leaky_relu(t)
        if self.kernel == 'exp':
            return torch.exp(t)
        return t

    def folds(self) -> bool:
        """Whether this call takes the folded path: it needs a linear phi and no dropout
        between attention and residual."""
        if self.impl == 'reference' or self.kernel != 'identity':
            return False
        return not (self.training and self.attn_drop > 0)

    def forward_reference(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None = None,
                          residual_input: torch.Tensor | None = None) -> torch.Tensor:
        """Textbook evaluation, any phi: (B, N, C) -> (B, N, C) before the output projection."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if valid_mask is not None:
            keep = valid_mask.unsqueeze(-1).to(v.dtype)
            k, v = k * keep, v * keep
        out = self.global_attention(q, k, v, valid_mask)
        source = x if residual_input is None else residual_input
        taps = self.residual(masked_token_mean(source, valid_mask).unsqueeze(-1))  # (B, 9C, 1)
        p = self.num_prefix_tokens
        if p > 0:  # the grid's tokens alone are filtered; the prefix tokens' residual is 0
            local = F.pad(self.local_residual(v[:, p:], taps, hw_shape), (0, 0, p, 0))
        else:
            local = self.local_residual(v, taps, hw_shape)
        out = F.dropout(out, self.attn_drop, self.training) + local
        if self.get_v is not None:
            b, _n, c = v.shape
            vmap = v.transpose(1, 2).reshape(b, c, hw_shape[0], hw_shape[1])
            out = out + self.get_v(vmap).flatten(2).transpose(1, 2)
        return out

    def forward_folded(self, x: torch.Tensor, hw_shape: HW, valid_mask: torch.Tensor | None = None,
                       residual_input: torch.Tensor | None = None) -> torch.Tensor:
        """Identity phi, regrouped: (B, N, C) -> (B, N, C) before the output projection.

        With q = x Wq^T + bq, the global term ``s * q_i^T ctx_h + mean(v)`` of all heads is
        ``x_i^T A + a`` with ``A = s * Wq^T blockdiag(ctx)`` (C x C) and
        ``a = s * bq^T blockdiag(ctx) + mean(v)``: one GEMM over x replaces the q
        projection and the per-head products. ``a`` rides in as the bias of the depthwise
        filter and ``x A`` is accumulated in place onto its output, whose channels-last
        (N, C) layout is the token layout, so nothing is transposed or copied.
        ``ctx`` comes from ``context_from_gram`` or ``context_from_keys`` (see there).
        LePE, a fixed 3x3 depthwise filter over the same v, adds its taps to the predicted ones
        and its bias to ``a``.
        """
        b, n, c = x.shape
        wq, _, wv = self.qkv.weight.split(c)
        bq: torch.Tensor | None = None
        bv: torch.Tensor | None = None
        if self.qkv.bias is not None:
            bq, _, bv = self.qkv.bias.split(c)
        # Under bfloat16 autocast, x (float32 out of a LayerNorm) is cast once, for v, the Gram and x A; a model
        # cast to bfloat16 hands x in bfloat16 already and takes the same route (the float32 ones would copy it)
        xl: torch.Tensor | None = None
        if not torch.jit.is_scripting():  # noqa: SIM102 (alone: only then does TorchScript skip the block)
            if (not traced() or compiling_for_run()) and (bf16_autocast(x) or x.dtype == torch.bfloat16):
                xl = x.to(torch.bfloat16)
        v = F.linear(x, wv, bv) if torch.jit.is_scripting() else fused.linear(x if xl is None else xl, wv, bv)
        keep: torch.Tensor | None = None
        if valid_mask is not None:
            keep = valid_mask.unsqueeze(-1)
            v = v * keep.to(v.dtype)
        # Token reductions in float32 even under autocast (see global_attention); TorchScript takes
        # no autocast region on a device known at run time only (its float32 casts stay)
        if torch.jit.is_scripting():
            mean_x, fold, bias = self.folded_reductions(x, v, keep, wq, wv, bq, bv)
        else:
            with torch.autocast(device_type=x.device.type, enabled=False):
                mean_x, fold, bias = self.folded_reductions(x, v, keep, wq, wv, bq, bv, xl)
        mean_r = cast(mean_x, x.dtype) if residual_input is None else masked_token_mean(residual_input, valid_mask)
        taps = self.residual(mean_r.unsqueeze(-1))  # (B, 9C, 1)
        get_v = self.get_v
        if get_v is not None:
            taps = taps + cast(get_v.weight.reshape(1, 9 * c, 1), taps.dtype)
            lepe_bias = get_v.bias
            if lepe_bias is not None:  # always (the conv has one); spelled out for TorchScript
                bias = bias + cast(lepe_bias, torch.float32)
        if traced():  # one graph for any batch: no per-sample loop, no batch-sized group count
            # x A, then the bias and the local residual in one pass (inductor fuses the adds): baddbmm
            # would write the broadcast bias into its output first and read it back in the product
            out = torch.bmm(cast(x, v.dtype), cast(fold, v.dtype))
            p = self.num_prefix_tokens
            grid = v[:, p:].reshape(b, hw_shape[0], hw_shape[1], c)
            local = depthwise3x3(grid, cast(taps.view(b, c, 9), v.dtype)).reshape(b, n - p, c)
            out = out + cast(bias.unsqueeze(1), v.dtype) + (F.pad(local, (0, 0, p, 0)) if p > 0 else local)
            return out  # folded: no dropout is active (``folds``)
        outs = []
        xa = x if xl is None else xl
        for i in range(b):
            y = self.local_residual_nhwc(v[i], taps[i], bias[i], hw_shape, self.num_prefix_tokens)  # (N, C)
            y.addmm_(xa[i].to(y.dtype), fold[i].to(y.dtype))
            outs.append(y)
        return outs[0].unsqueeze(0) if b == 1 else torch.stack(outs)

    def folded_reductions(self, x: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None, wq: torch.Tensor,
                          wv: torch.Tensor, bq: torch.Tensor | None, bv: torch.Tensor | None,
                          xl: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The folded path's token reductions, float32: x (B, N, C), v (B, N, C) (zero at padded
        tokens), ``keep`` (B, N, 1) bool or None -> mean(x) (B, C), ``A`` (B, C, C), ``a`` (B, C).
        ``xl``: x in bfloat16 under bf16 autocast or in a bfloat16 model (the Gram is then a bfloat16
        product, see ``context_from_centred``), else None."""
        b, n, c = x.shape
        heads, d = self.num_heads, self.head_dim
        keep_f = None if keep is None else keep.to(torch.float32)
        count = counted_tokens(x, keep_f)  # (B, 1)
        if xl is not None and self.impl == 'auto' and traced():
            mean_x, mean_v, ctx = self.reductions_by_cond(x, v, keep_f)
        elif xl is not None and self.centred_gram(n):  # the bfloat16 Gram reads x as it is: no float32 copy
            mean_x, mean_v, ctx = self.centred_reductions(xl, keep_f, count, wv, bv)
        else:
            mean_x, mean_v, ctx = self.float_reductions(x, v, keep_f, count, wv, bv)
        ctx = ctx * self.scale  # (B, h, d, d)
        # A[:, e, h*d + j] = sum_i Wq[h*d + i, e] ctx[h, i, j]
        fold = (cast(wq, torch.float32).t().reshape(1, c, heads, d).transpose(1, 2) @ ctx)  # (B, h, C, d)
        fold = fold.transpose(1, 2).reshape(b, c, c)
        bias = mean_v
        if bq is not None:
            bias = bias + (cast(bq, torch.float32).view(1, heads, 1, d) @ ctx).reshape(b, c)
        return mean_x, fold, bias

    def centred_reductions(self, xl: torch.Tensor, keep: torch.Tensor | None, count: torch.Tensor, wv: torch.Tensor,
                           bv: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """mean(x), mean(v) (B, C) and the unscaled ctx (B, h, d, d), float32, by ``context_from_centred``
        from x in bfloat16 (B, N, C); ``keep`` (B, N, 1) float32 or None; count (B, 1)."""
        mean_x, ctx = self.context_from_centred(xl, keep, count)
        mean_v = F.linear(mean_x, cast(wv, torch.float32), None if bv is None else cast(bv, torch.float32))
        return mean_x, mean_v, ctx

    def float_reductions(self, x: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None, count: torch.Tensor,
                         wv: torch.Tensor, bv: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """As ``centred_reductions`` from x (B, N, C) in float32, by the route ``folded_context`` takes."""
        xf = cast(x, torch.float32)
        xs = xf if keep is None else xf * keep
        mean_x = xs.sum(1, dtype=torch.float32) / count  # (B, C)
        mean_v = F.linear(mean_x, cast(wv, torch.float32), None if bv is None else cast(bv, torch.float32))
        return mean_x, mean_v, self.folded_context(xf, v, keep, count, mean_x, mean_v)

    @torch.jit.unused
    def reductions_by_cond(self, x: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Compiled under bfloat16 autocast: the eager choice of ``centred_gram`` (N > C) as a ``torch.cond``
        on the symbolic token count, so that no size guards the graph on it (see ``context_by_cond``; the
        weights, and x in bfloat16, are read inside each route: its inputs may not alias each other)."""
        def v_weights() -> tuple[torch.Tensor, torch.Tensor | None]:
            c, bias = self.embed_dims, self.qkv.bias
            return self.qkv.weight[2 * c:], None if bias is None else bias[2 * c:]

        def centred() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            return self.centred_reductions(x.to(torch.bfloat16), keep, counted_tokens(x, keep), *v_weights())

        def plain() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            return self.float_reductions(x, v, keep, counted_tokens(x, keep), *v_weights())

        return torch.cond(x.shape[1] > self.embed_dims, centred, plain)

    def folded_context(self, xf: torch.Tensor, vf: torch.Tensor, keep: torch.Tensor | None,
                       count: torch.Tensor, mean_x: torch.Tensor, mean_v: torch.Tensor) -> torch.Tensor:
        """Unscaled ctx (B, h, d, d), float32, by the route ``impl`` asks for (see ``use_gram``).

        ``xf`` x, (B, N, C) float32, and ``vf`` v (zero at padded tokens), (B, N, C), cast to float32
        by the keys route only; ``keep`` (B, N, 1) float32 mask of real tokens or None; count (B, 1);
        means (B, C). The weights are read inside each route: ``torch.cond`` takes no inputs that
        alias each other. (Eager bfloat16 autocast takes ``context_from_centred`` where it takes the Gram.)
        """
        if self.impl == 'folded_gram':
            return self.context_route_gram(xf, keep, count, mean_x)
        if self.impl == 'folded_keys':
            return self.context_route_keys(xf, vf, keep, count, mean_x, mean_v)
        if not torch.jit.is_scripting():  # noqa: SIM102 (alone: only then does TorchScript skip the block)
            if torch.compiler.is_compiling():
                return self.context_by_cond(xf, vf, keep, mean_x, mean_v)
        if self.use_gram(xf.shape[1]):
            return self.context_route_gram(xf, keep, count, mean_x)
        return self.context_route_keys(xf, vf, keep, count, mean_x, mean_v)

    @torch.jit.unused
    def context_by_cond(self, xf: torch.Tensor, vf: torch.Tensor, keep: torch.Tensor | None,
                        mean_x: torch.Tensor, mean_v: torch.Tensor) -> torch.Tensor:
        """Compiled: a Python branch on the token count would guard the graph on it (a recompile,
        or a specialised export, whenever a size crosses the threshold); ``torch.cond`` keeps both
        routes in the graph and picks one at run time from the symbolic count."""
        def from_gram() -> torch.Tensor:
            return self.context_route_gram(xf, keep, counted_tokens(xf, keep), mean_x)

        def from_keys() -> torch.Tensor:
            return self.context_route_keys(xf, vf, keep, counted_tokens(xf, keep), mean_x, mean_v)

        return torch.cond(self.use_gram(xf.shape[1]), from_gram, from_keys)

    def context_route_gram(self, xf: torch.Tensor, keep: torch.Tensor | None, count: torch.Tensor,
                           mean_x: torch.Tensor) -> torch.Tensor:
        """``context_from_gram`` with the weights read here, float32."""
        c = self.embed_dims
        w = cast(self.qkv.weight, torch.float32)
        xs = xf if keep is None else xf * keep
        return self.context_from_gram(xs, xf, count, mean_x, w[c:2 * c], w[2 * c:])

    def context_route_keys(self, xf: torch.Tensor, vf: torch.Tensor, keep: torch.Tensor | None,
                           count: torch.Tensor, mean_x: torch.Tensor, mean_v: torch.Tensor) -> torch.Tensor:
        """``context_from_keys`` with the keys formed here, float32."""
        c = self.embed_dims
        wk = cast(self.qkv.weight, torch.float32)[c:2 * c]
        bias = self.qkv.bias
        bk = None if bias is None else cast(bias, torch.float32)[c:2 * c]
        k = F.linear(xf, wk, bk)
        if keep is not None:
            k = k * keep
        return self.context_from_keys(k, cast(vf, torch.float32), count, F.linear(mean_x, wk, bk), mean_v)

    def centred_gram(self, n: int) -> bool:
        """Whether eager bfloat16 autocast takes ``context_from_centred`` for N tokens (``impl``; for 'auto',
        from N > C on).

        Its N*C*C product is a bfloat16 GEMM, while the keys route's k projection (N*C*C too) runs in
        float32 with float32 copies of x and v: with a matrix unit several times faster in bfloat16, the
        Gram way wins once its float32 C^3 + C*C*d share is small next to N*C*C, about from N > C on,
        far below ``use_gram``'s count (which weighs both at one rate): 385 vs 4993 tokens at C = 384, 12 heads."""
        return self.impl != 'folded_keys' and (self.impl == 'folded_gram' or n > self.embed_dims)

    def use_gram(self, n: int) -> bool:
        """Whether ``context_from_gram`` is cheaper than ``context_from_keys`` for N tokens.

        Gram: N*C*C (x^T x) + C^3 + C*C*d multiply-adds; keys: N*C*C (the k projection)
        + N*C*d (K^T V per head). The Gram way wins once N > C * (heads + 1): from 385
        tokens at C = 96 with 3 heads, only from 8705 at C = 512 with 16 heads.
        """
        c, d = self.embed_dims, self.head_dim
        return n * c * d > c ** 3 + c * c * d

    def context_from_gram(self, xs: torch.Tensor, xf: torch.Tensor, count: torch.Tensor,
                          mean_x: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor) -> torch.Tensor:
        """Unscaled per-head ctx (B, h, d, d) from the token covariance of x, float32.

        ``K^T V / N - mean(k) mean(v)^T = Wk_h Cov(x) Wv_h^T`` (the biases cancel), with
        ``Cov(x) = x^T x / N - mean(x) mean(x)^T``: k is never formed. ``xs`` is x with
        padded tokens zeroed (or x itself), ``xf`` is x, both (B, N, C); count (B, 1).
        """
        cov = xs.transpose(1, 2) @ xf  # (B, C, C)
        cov = cov / count.unsqueeze(-1) - mean_x.unsqueeze(2) * mean_x.unsqueeze(1)
        return self.context_from_cov(cov, wk, wv)

    def context_from_cov(self, cov: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor) -> torch.Tensor:
        """Per-head ``Wk_h Cov(x) Wv_h^T`` (B, h, d, d) from the token covariance (B, C, C), float32."""
        b, c = cov.shape[0], self.embed_dims
        heads, d = self.num_heads, self.head_dim
        right = (cov @ wv.t()).view(b, c, heads, d).transpose(1, 2)  # (B, h, C, d)
        return wk.view(1, heads, d, c) @ right

    def context_from_centred(self, xl: torch.Tensor, keep: torch.Tensor | None,
                             count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The mean and ``context_from_gram`` under bfloat16 autocast, without a float32 copy of x: xl (B, N, C)
        bfloat16, ``keep`` (B, N, 1) float32 or None, count (B, 1) -> mean(x) (B, C) and unscaled ctx
        (B, h, d, d), float32.

        The covariance is one bfloat16 GEMM (float32 accumulation inside) over x centred on ``m``, a
        bfloat16 estimate of its mean, so that no ``E[x x^T] - mean mean^T`` cancels in 8-bit mantissas.
        ``m`` comes from a bfloat16 sum (float32 accumulation, one rounding: relative error 2^-9); the
        sum of the centred values, small, gives ``delta = mean - m`` to 2^-9 of itself, so mean(x) is
        ``m + delta`` to about 2^-18 of it; and ``sum (x - m)(x - m)^T / N = Cov(x) + delta delta^T``, the last
        term taken off in float32.
        """
        c = self.embed_dims
        w = cast(self.qkv.weight, torch.float32)
        xs = xl if keep is None else xl * keep.to(xl.dtype)
        m = (xs.sum(1).float() / count).to(xl.dtype)  # (B, C)
        centred = xl - m.unsqueeze(1)
        cs = centred if keep is None else centred * keep.to(xl.dtype)
        delta = cs.sum(1).float() / count
        b = xl.shape[0]
        # compiled, a batch of 2 or more is a symbolic size (known to be above 1: no guard here) that a loop
        # would fix: one batched product, one graph; else one 2-D product per sample, as the batched
        # bfloat16 product copies x^T first
        if traced() and b != 1:
            gram = cs.transpose(1, 2) @ centred
        else:
            gram = torch.stack([torch.mm(cs[i].t(), centred[i]) for i in range(b)])
        cov = gram.float() / count.unsqueeze(-1) - delta.unsqueeze(2) * delta.unsqueeze(1)
        return m.float() + delta, self.context_from_cov(cov, w[c:2 * c], w[2 * c:])

    def context_from_keys(self, k: torch.Tensor, v: torch.Tensor, count: torch.Tensor,
                          mean_k: torch.Tensor, mean_v: torch.Tensor) -> torch.Tensor:
        """Unscaled per-head ctx (B, h, d, d) from k, v (B, N, C) (zero at padded tokens), float32."""
        b, n, _c = k.shape
        heads, d = self.num_heads, self.head_dim
        kv = k.view(b, n, heads, d).permute(0, 2, 3, 1) @ v.view(b, n, heads, d).transpose(1, 2)
        return kv / count.view(b, 1, 1, 1) - mean_k.view(b, heads, d, 1) * mean_v.view(b, heads, 1, d)

    def global_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                         valid_mask: torch.Tensor | None) -> torch.Tensor:
        """q, k, v (B, N, C) (k, v already zero at padded tokens) -> (B, N, C)."""
        b, n, _c = q.shape
        heads, d = self.num_heads, self.head_dim
        if valid_mask is None:
            count = token_count(q).view(b, 1, 1, 1)
        else:
            count = valid_mask.sum(1).clamp_min(1).to(torch.float32).view(b, 1, 1, 1)
        q = self.phi(q).view(b, n, heads, d).transpose(1, 2)  # (B, h, N, d)
        k = self.phi(k)
        if valid_mask is not None and self.kernel != 'identity':
            k = k * valid_mask.unsqueeze(-1).to(k.dtype)  # phi(0) need not be 0
        k = k.view(b, n, heads, d).transpose(1, 2)
        v = v.view(b, n, heads, d).transpose(1, 2)
        # Sums over all tokens run in float32 even under autocast: at detection
        # resolution they add up hundreds of thousands of terms and overflow fp16.
        if torch.jit.is_scripting():
            ctx, mean_v = self.global_context(k, v, count)
        else:
            with torch.autocast(device_type=q.device.type, enabled=False):
                ctx, mean_v = self.global_context(k, v, count)
        out = (q @ cast(ctx, q.dtype)) + cast(mean_v, q.dtype)
        return merge_heads(out)

    def global_context(self, k: torch.Tensor, v: torch.Tensor,
                       count: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """k, v (B, h, N, d), count (B, 1, 1, 1) -> scaled ctx (B, h, d, d) and mean(v) (B, h, 1, d), float32."""
        kf, vf = cast(k, torch.float32), cast(v, torch.float32)
        mean_k = kf.sum(2, keepdim=True) / count  # (B, h, 1, d)
        mean_v = vf.sum(2, keepdim=True) / count
        ctx = kf.transpose(-2, -1) @ vf / count - mean_k.transpose(-2, -1) @ mean_v  # (B, h, d, d)
        return ctx * self.scale, mean_v

    @staticmethod
    def local_residual(v: torch.Tensor, taps: torch.Tensor, hw_shape: HW) -> torch.Tensor:
        """3x3 depthwise filter with per-sample taps over v: (B, N, C), (B, 9C, 1) -> (B, N, C)."""
        b, n, c = v.shape
        if traced():
            grid = v.reshape(b, hw_shape[0], hw_shape[1], c)
            return depthwise3x3(grid, cast(taps.view(b, c, 9), v.dtype)).reshape(b, n, c)
        vmap = v.transpose(1, 2).reshape(1, b * c, hw_shape[0], hw_shape[1])
        weight = taps.reshape(b * c, 1, 3, 3).to(v.dtype)
        out = F.conv2d(vmap, weight, padding=1, groups=b * c)
        return out.reshape(b, c, n).transpose(1, 2)

    @staticmethod
    def local_residual_nhwc(v: torch.Tensor, taps: torch.Tensor, bias: torch.Tensor,
                            hw_shape: HW, num_prefix_tokens: int = 0) -> torch.Tensor:
        """One sample: 3x3 depthwise filter over v (N, C) with taps (9C, 1) plus bias (C,) -> (N, C).

        (N, C) row-major is (H, W, C): viewed as a channels-last (1, C, H, W) map it goes
        to the depthwise kernel without a transpose, and comes back the same way.
        The first ``num_prefix_tokens`` rows are no grid cells: they get the bias alone.
        """
        n, c = v.shape
        p = num_prefix_tokens
        grid = v[p:].view(1, hw_shape[0], hw_shape[1], c).permute(0, 3, 1, 2)
        out = F.conv2d(grid, taps.reshape(c, 1, 3, 3).to(v.dtype), bias.to(v.dtype), padding=1, groups=c)
        out = out.permute(0, 2, 3, 1).reshape(n - p, c)
        if p > 0:
            return torch.cat([bias.to(v.dtype).view(1, c).expand(p, c), out], 0)
        return out
