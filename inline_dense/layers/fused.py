"""Linear layers for eager CPU inference with their bias, GELU and a residual add inside the GEMM.

``F.linear`` on a (B, N, C) input runs ``addmm``, which first writes the broadcast bias into a fresh output
and then accumulates the product onto it (one more pass over the output), and a following GELU or
residual add is one more pass each. oneDNN's linear kernel (``torch.ops.mkldnn._linear_pointwise``, what
``torch.compile`` calls for these layers) applies the bias, a GELU, or the add of another tensor to each
output tile while it is still in cache. On one core, ``nn.Linear(96, 384)`` on 60,800 tokens: fp32 70 ->
39 ms, with GELU 89 -> 46 ms; bf16 23 -> 11 ms, with GELU 40 -> 17 ms.

The kernel has no backward, so :func:`linear` takes it only where nothing is differentiated and nothing
is traced: eagerly, on the CPU, with gradients off (``torch.no_grad`` / ``inference_mode``), no
TorchDispatchMode active (FLOP counters see the plain ops), float32 or bfloat16 (under bfloat16 autocast
on a CPU with native bfloat16 the inputs and the weight are cast as autocast would). Everywhere else it
is ``F.linear`` followed by the activation and the add: the same function, the same parameters
(nothing is added to a module or its state dict). :func:`fusion_enabled` turns it off for comparisons.

Under bfloat16 autocast on the CPU the blocks' tokens are bfloat16: a convolution's output is, and
LayerNorm and the adds keep their input's dtype. A float32 tensor added to them (a learned position
embedding) makes them float32 from there on: every residual add then mixes float32 and bfloat16 (on one
core several times slower than an add of one dtype), fc2's fused residual add cannot take them, and every
linear layer casts its input back. In the same eager inference path, and in a graph compiled to run in
inference, :func:`in_token_dtype` rounds such a tensor to bfloat16 first, so the stream stays bfloat16 (as
InLine-Swin's always is).
"""
import contextlib
import functools
import weakref
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch.fx._symbolic_trace import is_fx_symbolic_tracing
from torch.utils._python_dispatch import _get_current_dispatch_mode

from .tensor_utils import channels_last, compiling_for_run, traced

ACTIVATIONS = ('none', 'gelu')

_ENABLED = [True]
# a parameter's copy in another dtype, by id(parameter): (a weak reference to it, its version then, the copy);
# dropped when the parameter is (tensors compare elementwise, so no WeakKeyDictionary)
_CASTS: dict[int, tuple['weakref.ref[torch.Tensor]', int, torch.Tensor]] = {}


@contextlib.contextmanager
def fusion_enabled(enabled: bool) -> Iterator[None]:
    """Within the block, :func:`linear` takes the oneDNN kernel (True, the default) or never (False)."""
    before = _ENABLED[0]
    _ENABLED[0] = enabled
    try:
        yield
    finally:
        _ENABLED[0] = before


@functools.cache
def _probe_onednn_bf16() -> bool:
    probe = getattr(torch.ops.mkldnn, '_is_mkldnn_bf16_supported', None)
    try:
        return bool(probe()) if probe is not None else False
    except (RuntimeError, AttributeError):
        return False


@torch.compiler.assume_constant_result  # a fact of the CPU: a constant in a traced graph
def _onednn_bf16() -> bool:
    """Whether oneDNN runs bfloat16 natively on this CPU (probed once)."""
    return _probe_onednn_bf16()


def fused_dtype(x: torch.Tensor) -> torch.dtype | None:
    """The dtype the oneDNN kernel would run ``x``'s linear layer in, or None where :func:`linear`
    takes ``F.linear`` (see the module's docstring)."""
    if (not _ENABLED[0] or torch.is_grad_enabled() or is_fx_symbolic_tracing() or traced()
            or _get_current_dispatch_mode() is not None or x.device.type != 'cpu'
            or not torch.backends.mkldnn.is_available()):
        return None
    dtype = x.dtype
    if torch.is_autocast_enabled('cpu') and x.is_floating_point():
        dtype = torch.get_autocast_dtype('cpu')
    if dtype == torch.float32:
        return dtype
    if dtype == torch.bfloat16 and _onednn_bf16():
        return dtype
    return None


def _weight(w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if w.dtype == dtype:
        return w
    if not isinstance(w, torch.nn.Parameter):  # a view (a slice of qkv's weight): cast, not kept
        return w.detach().to(dtype)
    key = id(w)
    hit = _CASTS.get(key)
    if hit is not None and hit[0]() is w and hit[1] == w._version and hit[2].dtype == dtype:
        return hit[2]
    cast = w.detach().to(dtype)
    _CASTS[key] = (weakref.ref(w, functools.partial(_forget, key)), w._version, cast)
    return cast


def _forget(key: int, _ref: object) -> None:
    _CASTS.pop(key, None)


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, activation: str = 'none',
           residual: torch.Tensor | None = None) -> torch.Tensor:
    """``residual + activation(x @ weight^T + bias)`` (``residual`` None: no add), x (..., C_in), weight
    (C_out, C_in) -> (..., C_out); ``activation`` 'none' or 'gelu' (exact, ``nn.GELU()``'s). Under autocast
    the product is in autocast's dtype, as ``F.linear``'s; with ``residual``, the sum is in the promoted
    dtype of the two, as ``residual + y``.

    Not scriptable: a scripted model calls ``F.linear`` itself (``if not torch.jit.is_scripting()``)."""
    dtype = fused_dtype(x)
    if dtype is None:
        y = F.linear(x, weight, bias)
        if activation == 'gelu':
            y = F.gelu(y)
        return y if residual is None else residual + y
    xin = x if x.dtype == dtype else x.to(dtype)
    if not xin.is_contiguous():
        xin = xin.contiguous()
    w = _weight(weight, dtype)
    b = None if bias is None else _weight(bias, dtype)
    if residual is not None and activation == 'none' and residual.dtype == dtype and residual.shape == (
            *x.shape[:-1], weight.shape[0]):
        other = residual if residual.is_contiguous() else residual.contiguous()
        return torch.ops.mkldnn._linear_pointwise.binary(xin, other, w, b, 'add')
    y = torch.ops.mkldnn._linear_pointwise(xin, w, b, activation, [], 'none' if activation == 'gelu' else '')
    return y if residual is None else residual + y


def in_token_dtype(t: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``t`` (to be added to ``tokens``) in the tokens' bfloat16 where they are bfloat16 in CPU inference
    under bfloat16 autocast, eager (:func:`fused_dtype`) or compiled to run (``torch.compile``, gradients
    off, a CPU with native bfloat16: the graph computes what eager does), else ``t`` itself: ``tokens + t``
    then stays bfloat16 (see the module's docstring). Exported graphs and training keep autocast's own
    dtypes. Not scriptable (a scripted model adds ``t`` as it is)."""
    if is_fx_symbolic_tracing() or not torch.is_autocast_enabled('cpu'):  # a proxy's dtype is no bool
        return t
    if tokens.dtype != torch.bfloat16 or t.dtype == tokens.dtype:
        return t
    if compiling_for_run():
        stream = (not torch.is_grad_enabled() and tokens.device.type == 'cpu'
                  and torch.get_autocast_dtype('cpu') == torch.bfloat16 and _onednn_bf16())
    else:
        stream = fused_dtype(tokens) == torch.bfloat16
    return t.to(tokens.dtype) if stream else t


def conv_input(x: torch.Tensor) -> torch.Tensor:
    """A convolution's input map (B, C, H, W), channels-last (``tensor_utils.channels_last``); float32 ``x``
    in eager CPU inference under bfloat16 autocast (:func:`fused_dtype`) comes out bfloat16 in the same copy,
    the cast the convolution would make (instead of a layout copy, then autocast's cast). Not scriptable
    (a scripted model calls ``channels_last``)."""
    if (not is_fx_symbolic_tracing() and torch.is_autocast_enabled('cpu') and x.dtype == torch.float32
            and fused_dtype(x) == torch.bfloat16):
        return x.to(torch.bfloat16, memory_format=torch.channels_last)
    return channels_last(x)


def plain_linear(module: torch.nn.Module) -> bool:
    """Whether ``module`` is an ``nn.Linear`` itself (not a subclass or a wrapper that changes its call)
    with no hooks on it: then :func:`linear` on its weight and bias is its call."""
    return (type(module) is torch.nn.Linear and not module._forward_hooks and not module._forward_pre_hooks
            and not torch.nn.modules.module._global_forward_hooks
            and not torch.nn.modules.module._global_forward_pre_hooks)


def linear_module(x: torch.Tensor, module: torch.nn.Module, activation: str = 'none',
                  residual: torch.Tensor | None = None) -> torch.Tensor:
    """:func:`linear` with ``module``'s weight and bias when it is a plain ``nn.Linear`` (:func:`plain_linear`),
    else ``module(x)`` then the activation and the add."""
    if plain_linear(module):
        return linear(x, module.weight, module.bias, activation, residual)  # type: ignore[arg-type]
    y = module(x)
    if activation == 'gelu':
        y = F.gelu(y)
    return y if residual is None else residual + y
