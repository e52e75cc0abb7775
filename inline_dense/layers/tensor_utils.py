"""Tensor helpers shared by the attention layers and the bricks around them: head bookkeeping,
and whether a call is being traced into a graph (where a no-op must leave no node)."""
from typing import Final

import torch

from ..typing import HW

NEG_INF: Final[float] = -100.0  # the score Swin gives a masked key; exp(-100) is 0 in float32


def check_heads(embed_dims: int, num_heads: int, where: str) -> int:
    """Returns head_dim; raises a ValueError a user can act on otherwise."""
    if num_heads <= 0 or embed_dims % num_heads:
        raise ValueError(
            f'{where}: embed_dims={embed_dims} is not divisible by num_heads={num_heads}; '
            f'choose num_heads among the divisors of {embed_dims}.')
    return embed_dims // num_heads


def traced() -> bool:
    """Whether this call is being traced into a graph (torch.compile, torch.export and the ONNX
    exporter, TorchScript tracing) rather than run eagerly. Dynamo folds it to a constant."""
    if torch.jit.is_scripting():  # a scripted model runs its eager code
        return False
    else:
        return torch.compiler.is_compiling() or torch.jit.is_tracing()


def compiling_for_run() -> bool:
    """Whether ``torch.compile`` is tracing this call for running it in this process, not for exporting a
    graph (``torch.export``, the ONNX exporter): a graph that stays here may hold kernels whose arguments
    depend on the batch size (a convolution's group count), an exported one may not."""
    if torch.jit.is_scripting():
        return False
    else:
        return torch.compiler.is_compiling() and not torch.compiler.is_exporting()


def cast(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` in ``dtype``: ``t`` itself when it already is (as ``Tensor.to``), without a cast node
    in a traced graph (the float32 casts around the token sums are no-ops outside autocast)."""
    return t if t.dtype == dtype else t.to(dtype)


def tokens_to_map(tokens: torch.Tensor, hw: HW) -> torch.Tensor:
    """(B, H*W, C) tokens of an ``hw`` grid -> the (B, C, H, W) map, as a view of the tokens' memory
    (channels-last: no transposing copy; a convolution on it runs channels-last)."""
    b, c = tokens.shape[0], tokens.shape[2]
    return tokens.reshape(b, hw[0], hw[1], c).permute(0, 3, 1, 2)


def channels_last(x: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) in channels-last memory, eagerly: a convolution on it writes channels-last, whose
    ``flatten(2).transpose(1, 2)`` tokens (B, H*W, C) are contiguous, so the LayerNorm after it copies
    nothing. Traced, ``x`` itself (the compiler chooses its layouts)."""
    return x if traced() else x.contiguous(memory_format=torch.channels_last)


def merge_heads(out: torch.Tensor) -> torch.Tensor:
    """Attention output per head (B, h, N, d) -> tokens (B, N, h*d).

    Traced, the copy is explicit: an attention kernel may hand back (B, N, h, d) memory, and a
    graph that reshapes it as a free view breaks once its kernels are decomposed (ONNX export).
    """
    b, heads, n, d = out.shape
    out = out.transpose(1, 2)
    if traced():
        out = out.clone(memory_format=torch.contiguous_format)
    return out.reshape(b, n, heads * d)
