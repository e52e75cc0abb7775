"""The eager CPU inference path of the linear layers (bias, GELU and residual add inside oneDNN's GEMM):
the same function as ``F.linear`` + GELU + add, taken only where nothing is differentiated, and the same
backbone outputs as the plain path for every family, float32 and bfloat16 autocast; under bfloat16 autocast
the blocks' tokens stay bfloat16."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from helpers import TINY_KINDS, build_tiny
from inline_dense.layers import fused
from inline_dense.layers.block import TransformerBlock
from inline_dense.runtime.precision import native_bf16_cpu, relative_l2, trained_scale_

BF16 = pytest.mark.skipif(not native_bf16_cpu(), reason='this CPU has no native bfloat16')


def reference(x, layer, activation='none', residual=None):
    y = F.linear(x, layer.weight, layer.bias)
    y = F.gelu(y) if activation == 'gelu' else y
    return y if residual is None else residual + y


@pytest.mark.parametrize('activation', ['none', 'gelu'])
@pytest.mark.parametrize('with_residual', [False, True])
@pytest.mark.parametrize('bias', [True, False])
def test_fused_linear_equals_linear_fp32(activation, with_residual, bias):
    torch.manual_seed(0)
    layer = nn.Linear(24, 40, bias=bias)
    x = torch.randn(2, 37, 24)
    residual = torch.randn(2, 37, 40) if with_residual else None
    with torch.no_grad():
        assert fused.fused_dtype(x) == torch.float32
        out = fused.linear_module(x, layer, activation, residual)
        torch.testing.assert_close(out, reference(x, layer, activation, residual), rtol=1e-5, atol=1e-5)


@BF16
@pytest.mark.parametrize('activation', ['none', 'gelu'])
def test_fused_linear_under_bf16_autocast(activation):
    torch.manual_seed(0)
    layer = nn.Linear(24, 40)
    x = torch.randn(3, 50, 24)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        residual = torch.randn(3, 50, 40).bfloat16()
        out = fused.linear_module(x, layer, activation, residual)
        ref = reference(x, layer, activation, residual)
        again = fused.linear_module(x, layer, activation)  # the weight's bf16 copy is reused
    assert out.dtype == ref.dtype == torch.bfloat16
    rel = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
    assert rel < 1e-2
    assert again.dtype == torch.bfloat16
    with torch.no_grad():  # an in-place change of the weight is seen (the copy is keyed by its version)
        layer.weight.mul_(2)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            changed = fused.linear_module(x, layer, activation)
            expected = reference(x, layer, activation)
    rel = ((changed.float() - expected.float()).norm() / expected.float().norm()).item()
    assert rel < 1e-2


def test_plain_path_where_gradients_tracing_or_hooks_need_it():
    layer = nn.Linear(8, 8)
    x = torch.randn(4, 8)
    assert fused.fused_dtype(x) is None  # gradients on: F.linear, which autograd differentiates
    out = fused.linear_module(x, layer, 'gelu')
    out.sum().backward()
    assert layer.weight.grad is not None
    with torch.no_grad():
        with FlopCounterMode(display=False):  # FLOP counters see aten's ops
            assert fused.fused_dtype(x) is None
        with fused.fusion_enabled(False):
            assert fused.fused_dtype(x) is None
        assert fused.fused_dtype(x.half()) is None  # float16: no oneDNN path on the CPU
        seen = []
        layer.register_forward_hook(lambda *args: seen.append(1))
        assert not fused.plain_linear(layer)  # a hooked layer is called as a module
        fused.linear_module(x, layer)
        assert seen == [1]


def stage_errors(kind, dtype):
    torch.manual_seed(0)
    model = build_tiny(kind).eval()
    x = torch.randn(2, 3, 96, 128)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=dtype == 'bf16'):
        fast = model(x)
        with fused.fusion_enabled(False):
            plain = model(x)
    return [((a.float() - b.float()).norm() / b.float().norm()).item() for a, b in zip(fast, plain)]


@pytest.mark.parametrize('kind', TINY_KINDS)
def test_backbones_fused_equal_plain_fp32(kind):
    assert max(stage_errors(kind, 'fp32')) < 1e-5


@BF16
@pytest.mark.parametrize('kind', TINY_KINDS)
def test_backbones_fused_close_to_plain_bf16(kind):
    assert max(stage_errors(kind, 'bf16')) < 2e-2


@pytest.mark.parametrize('kind', TINY_KINDS)
def test_training_mode_still_differentiates(kind):
    """A training step (gradients on) never takes the oneDNN kernel: every parameter gets its gradient."""
    model = build_tiny(kind).train()
    out = model(torch.randn(1, 3, 64, 64))
    sum(o.float().sum() for o in out).backward()
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing


@BF16
@pytest.mark.parametrize('kind', TINY_KINDS)
def test_bf16_inference_keeps_every_block_in_bf16(kind):
    """Eager bfloat16 inference: every block takes bfloat16 tokens (a float32 position embedding is rounded
    first, :func:`fused.in_token_dtype`), and the outputs, weights at the scale of trained ones, stay within
    the bfloat16 bound of float32. With gradients on, autocast's own dtypes (float32 after such an add)."""
    torch.manual_seed(0)
    model = trained_scale_(build_tiny(kind)).eval()
    seen = []
    for m in model.modules():
        if isinstance(m, TransformerBlock):
            m.register_forward_pre_hook(lambda _m, args: seen.append(args[0].dtype))
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        ref = model(x)
        seen.clear()
        with torch.autocast('cpu', dtype=torch.bfloat16):
            out = model(x)
    assert seen
    assert set(seen) == {torch.bfloat16}
    assert max(relative_l2(o, r) for o, r in zip(out, ref)) < 2e-2
    seen.clear()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        model(x)
    if kind in ('pvt', 'deit'):
        assert torch.float32 in seen


@pytest.mark.parametrize('kind', ['pvt', 'deit'])
def test_compiled_bf16_inference_keeps_the_token_stream_bf16(kind, monkeypatch):
    """Compiled to run (torch.compile), bfloat16 inference rounds the float32 position embedding as eager
    does, so the graph's residual adds stay bfloat16 (float32 outputs would show a float32 stream); with
    gradients on, and in a graph exported rather than run, autocast's own dtypes. On a CPU without native
    bfloat16 the probe is stood in for: the decision is made while tracing, with no bfloat16 kernel run."""
    monkeypatch.setattr(fused, '_onednn_bf16', lambda: True)
    torch.manual_seed(0)
    model = trained_scale_(build_tiny(kind)).eval()
    x = torch.randn(1, 3, 96, 128)
    with torch.no_grad():
        ref = model(x)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(model, backend='eager', fullgraph=True)
        with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
            out = compiled(x)
        assert {o.dtype for o in out} == {torch.bfloat16}
        assert max(relative_l2(o, r) for o, r in zip(out, ref)) < 2e-2
        with torch.autocast('cpu', dtype=torch.bfloat16):
            assert {o.dtype for o in compiled(x)} == {torch.float32}
        with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
            exported = torch.export.export(model, (x,))
        assert {o.dtype for o in exported.module()(x)} == {torch.float32}
    finally:
        torch._dynamo.reset()


@BF16
def test_conv_input_casts_to_bf16_only_in_bf16_inference():
    x = torch.randn(1, 3, 16, 24)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        assert fused.conv_input(x).dtype == torch.float32  # gradients on: the convolution's autocast casts
        with torch.no_grad():
            y = fused.conv_input(x)
    assert y.dtype == torch.bfloat16
    assert y.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(y, x.bfloat16())
    with torch.no_grad():
        assert fused.conv_input(x).dtype == torch.float32


def test_in_token_dtype_leaves_other_paths_alone():
    pos = torch.randn(1, 6, 8)
    tokens = torch.randn(1, 6, 8).bfloat16()
    assert fused.in_token_dtype(pos, tokens) is pos  # gradients on
    with torch.no_grad():
        assert fused.in_token_dtype(pos, tokens) is pos  # no autocast: a bfloat16 model's own dtypes
        if native_bf16_cpu():
            with torch.autocast('cpu', dtype=torch.bfloat16):
                assert fused.in_token_dtype(pos, tokens).dtype == torch.bfloat16
                assert fused.in_token_dtype(pos, tokens.float()) is pos
