"""Where a forward pass spends its time: the share of the profiler's self CPU time that is not a matrix product.

The CPU's limit for a backbone is its GEMM rate (:mod:`.gemm`); everything else a pass does (layer norms,
activations, casts, copies, additions, the compiler's fused loops) moves bytes. :func:`non_gemm_share`
profiles one forward (``torch.profiler``, self CPU time per op, shapes recorded) and splits the ops in two:

* GEMM-class: matrix products (``addmm``, ``mm``, ``bmm``, ``baddbmm``, oneDNN's and MKL's linear kernels,
  with or without fused bias / activation), dense convolutions (a patch embedding is a GEMM), and the fused
  attention kernel (``scaled_dot_product_attention``: products inside);
* everything else, depthwise convolutions included (memory-bound), and the code ``torch.compile`` generates
  (its fused kernels run as one ``CompiledFxGraph`` call, which holds no GEMM: inductor calls those out).
"""
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

# self time of these ops is matrix-product work
GEMM_OPS = frozenset({
    'aten::addmm', 'aten::addmm_', 'aten::mm', 'aten::bmm', 'aten::baddbmm', 'aten::baddbmm_', 'aten::addbmm',
    'aten::_addmm_activation', 'mkldnn::_linear_pointwise', 'mkldnn::_linear_pointwise.binary',
    'mkl::_mkl_linear', 'aten::mkldnn_linear', 'onednn::qlinear_pointwise',
    'aten::_scaled_dot_product_flash_attention_for_cpu', 'aten::_scaled_dot_product_attention_math',
})
CONV_OPS = frozenset({'aten::mkldnn_convolution', 'mkldnn::_convolution_pointwise', 'aten::_convolution',
                      'aten::convolution', 'aten::conv2d', 'aten::_slow_conv2d_forward', 'aten::thnn_conv2d',
                      'mkldnn::_convolution_pointwise.binary', 'aten::_nnpack_spatial_convolution'})


def is_gemm(name: str, input_shapes: list[Any] | None = None) -> bool:
    """Whether an op's self time counts as GEMM work: a matrix product, or a convolution that is not
    depthwise (the weight's input channels per group, ``input_shapes[1][1]``, above 1, or a 1-channel input)."""
    if name in GEMM_OPS:
        return True
    if name in CONV_OPS:
        shapes = input_shapes or []
        if len(shapes) >= 2 and len(shapes[0]) == 4 and len(shapes[1]) == 4:
            return shapes[1][1] > 1 or shapes[0][1] == 1
        return True  # shapes not recorded: counted as dense
    return False


@dataclass
class OpShare:
    """One profiled pass: total self CPU ms, the GEMM-class part, and the largest non-GEMM ops."""
    total_ms: float
    gemm_ms: float
    top_other: list[tuple[str, float]]  # (op, self ms), largest first

    @property
    def non_gemm_share(self) -> float:
        return 1.0 - self.gemm_ms / self.total_ms if self.total_ms else float('nan')

    def as_dict(self) -> dict[str, Any]:
        return dict(total_ms=self.total_ms, gemm_ms=self.gemm_ms, non_gemm_share=self.non_gemm_share,
                    top_other=self.top_other)


def split_events(events: Iterable[Any], top: int = 6) -> OpShare:
    """``events``: the profiler's ``key_averages(group_by_input_shape=True)`` (``key``, ``self_cpu_time_total`` in
    us, ``input_shapes``) -> the split. Profiler markers with no work of their own (the compiled region's
    wrapper, the cache lookup) have tiny self times and count as non-GEMM."""
    total = gemm = 0.0
    other: dict[str, float] = {}
    for e in events:
        ms = e.self_cpu_time_total / 1e3
        total += ms
        if is_gemm(e.key, getattr(e, 'input_shapes', None)):
            gemm += ms
        else:
            other[e.key] = other.get(e.key, 0.0) + ms
    ranked = sorted(other.items(), key=lambda kv: -kv[1])[:top]
    return OpShare(total, gemm, [(k, round(v, 1)) for k, v in ranked])


def non_gemm_share(call: Callable[[], Any], warmup: int = 1) -> OpShare:
    """Profiles one ``call()`` after ``warmup`` calls (one thread is what the figures are taken at: set it before)."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        call()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        call()
    return split_events(prof.key_averages(group_by_input_shape=True))
