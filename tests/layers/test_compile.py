"""torch.compile(dynamic=True): InLine attention and the InLine backbones compile once for every
size (no recompile, no graph break inside attention) and compute what eager computes.

Only graph capture is checked here, with the cheap 'eager' / 'aot_eager' backends; the speed-up
of 'inductor' is measured by ``tools/benchmark.py --compile``.
"""
import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.testing import CompileCounter, CompileCounterWithBackend, EagerAndRecordGraphs

from helpers import EVERY_KIND_ONCE
from inline_dense.layers.block import TransformerBlock
from inline_dense.layers.inline_attention import InLineAttention, depthwise3x3


def relative_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    return float((got - ref).abs().max() / ref.abs().max())


@pytest.fixture(autouse=True)
def fresh_dynamo(one_thread):
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_depthwise3x3_is_the_per_sample_grouped_convolution():
    torch.manual_seed(0)
    b, h, w, c = 3, 5, 7, 4
    grid, taps = torch.randn(b, h, w, c), torch.randn(b, c, 9)
    ref = F.conv2d(grid.permute(0, 3, 1, 2).reshape(1, b * c, h, w), taps.reshape(b * c, 1, 3, 3), padding=1,
                   groups=b * c).view(b, c, h, w).permute(0, 2, 3, 1)
    assert relative_error(depthwise3x3(grid, taps), ref) < 1e-6
    flipped = taps.view(b, c, 3, 3).flip(-1).reshape(b, c, 9)  # tap order matters
    assert relative_error(depthwise3x3(grid, flipped), ref) > 1e-2


@pytest.mark.parametrize('impl', ['auto', 'reference'])
def test_inline_attention_compiles_once_across_the_auto_threshold(impl):
    """Sizes on both sides of use_gram's token count, batch 2 and 3: one graph, eager's result.

    With LePE (InLine-CSwin's layer): its graph holds every operation of the layer without LePE
    (InLine-Swin's and InLine-PVT's), which those backbones' compile tests check at three sizes."""
    torch.manual_seed(0)
    attn = InLineAttention(32, 2, impl=impl, lepe=True).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0, 0.2)
    counter = CompileCounter()
    compiled = torch.compile(attn, backend=counter, dynamic=True)
    sizes = [(2, 9, 11), (3, 13, 7), (2, 30, 25)]
    assert len({attn.use_gram(h * w) for _, h, w in sizes}) == 2  # the threshold is crossed
    for b, h, w in sizes:
        x = torch.randn(b, h * w, 32)
        mask = torch.ones(b, h, w, dtype=torch.bool)
        mask[0, h - 2:, :] = False
        for valid in (None, mask.view(b, -1)):
            with torch.no_grad():
                assert relative_error(compiled(x, (h, w), valid), attn(x, (h, w), valid)) < 1e-5
    assert counter.frame_count == 2  # one graph without a padding mask, one with


def test_traced_folded_product_writes_no_broadcast_bias():
    """Traced, the folded path's x A is a plain batched product, and its bias joins the local residual's add
    (one pass): ``baddbmm`` would first write the broadcast bias over its whole output, then read it back."""
    torch.manual_seed(0)
    attn = InLineAttention(32, 2).eval()
    recording = EagerAndRecordGraphs()
    x = torch.randn(2, 30 * 25, 32)
    with torch.no_grad():
        out = torch.compile(attn, backend=recording, dynamic=True)(x, (30, 25))
        ref = attn(x, (30, 25))
    calls = {node.target for gm in recording.graphs for node in gm.graph.nodes if node.op == 'call_function'}
    assert torch.bmm in calls
    assert torch.baddbmm not in calls
    assert relative_error(out, ref) < 1e-5


def test_no_graph_break_inside_an_inline_block():
    block = TransformerBlock(32, InLineAttention(32, 2, lepe=True), residual_from_input=True).eval()
    x = torch.randn(2, 6 * 9, 32)
    for valid in (None, torch.ones(2, 6 * 9, dtype=torch.bool)):
        explained = torch._dynamo.explain(block)(x, (6, 9), valid)
        assert explained.graph_break_count == 0, explained.break_reasons
        assert explained.graph_count == 1


def tiny_for_compile(tiny_backbone, kind):
    # Every kind of block once (capture time grows with the blocks). Swin with window 2: its last
    # grids stay above one window (a grid within one window is attended as a window of its own
    # size, a branch on the size); sizes above ~16 x 16 / batch pixels keep torch's own convolution
    # choice (a guard on batch x rows) the same.
    return tiny_backbone(kind, drop_path_rate=0.0, **EVERY_KIND_ONCE[kind],
                         **(dict(window_size=2) if kind == 'swin' else {})).train()


@pytest.mark.slow
def test_backbones_compile_once_for_three_sizes(kind, tiny_backbone):
    """Batch 2 and 3, three heights and widths, training mode: one graph, eager's features."""
    torch.manual_seed(0)
    model = tiny_for_compile(tiny_backbone, kind)
    counter = CompileCounter()
    compiled = torch.compile(model, backend=counter, dynamic=True)
    with torch.no_grad():
        for shape in [(2, 3, 150, 171), (3, 3, 163, 145), (2, 3, 177, 155)]:
            x = torch.randn(*shape)
            for got, want in zip(compiled(x), model(x)):
                assert relative_error(got, want) < 1e-5
        assert counter.frame_count == 1
        # dynamo specialises batch 1: one more graph, once, then shared by every batch-1 size
        for shape in [(1, 3, 150, 161), (1, 3, 170, 141)]:
            compiled(torch.randn(*shape))
    assert counter.frame_count == 2


def gradients(model: torch.nn.Module, outs) -> torch.Tensor:
    """Backward of a fixed loss on the outputs; every parameter's gradient, flattened (and cleared)."""
    sum(o.square().mean() for o in outs).backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    model.zero_grad()
    return grads


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['swin', 'cswin'])  # InLine-PVT: the next test, from the same first input
def test_backbones_compiled_gradients_match_eager(kind, tiny_backbone):
    """Forward and backward of the whole backbone through aot_eager: eager's outputs and gradients.

    Static shapes: the joint forward-backward graph is the traced one (every padding branch on
    its padding side) whatever the shapes; dynamic capture with backward is the next test's.
    Captured with dynamic shapes, a whole tiny backbone takes 65-160 s here, static 10 s."""
    torch.manual_seed(0)
    model = tiny_for_compile(tiny_backbone, kind)
    counter = CompileCounterWithBackend('aot_eager')
    compiled = torch.compile(model, backend=counter, dynamic=False)
    x = torch.randn(2, 3, 150, 171)
    outs = compiled(x)
    grads = gradients(model, outs)
    ref = model(x)
    for got, want in zip(outs, ref):
        assert relative_error(got.detach(), want.detach()) < 1e-5
    # all gradients against the largest: some parameters' own are ~1e-8, where float32
    # summation order alone moves them by a few per cent
    assert relative_error(grads, gradients(model, ref)) < 1e-4
    assert counter.frame_count == 1


@pytest.mark.slow
def test_training_compiles_once_with_dynamic_shapes(tiny_backbone):
    """Forward and backward through aot_eager with dynamic shapes: one graph for two sizes and
    batches, eager's gradients at the second. InLine-PVT: the cheapest family to capture; this
    is also its gradient test (the graph is traced from the static test's input, 2x3x150x171).

    specialize_float: with autograd, dynamo (torch 2.14) first makes float module attributes
    (LayerNorm eps, dropout rates) symbolic, then restarts the capture once to specialise them;
    any model does this (a Linear + LayerNorm does). The restart counts as a second frame."""
    torch.manual_seed(0)
    model = tiny_for_compile(tiny_backbone, 'pvt')
    counter = CompileCounterWithBackend('aot_eager')
    compiled = torch.compile(model, backend=counter, dynamic=True)
    with torch._dynamo.config.patch(specialize_float=True):
        gradients(model, compiled(torch.randn(2, 3, 150, 171)))
        x = torch.randn(3, 3, 163, 145)
        outs = compiled(x)
        grads = gradients(model, outs)
    assert counter.frame_count == 1
    ref = model(x)
    for got, want in zip(outs, ref):
        assert relative_error(got.detach(), want.detach()) < 1e-5
    assert relative_error(grads, gradients(model, ref)) < 1e-4


@pytest.mark.slow
def test_padding_mask_path_compiles(tiny_backbone):
    """valid_hw (a padded batch): the compiled backbone gives eager's features. One batch holds
    images padded in height, in width and in both: each new valid_hw is a new graph (the README
    says why), so one call covers what two layouts would."""
    model = tiny_backbone('pvt').eval()
    compiled = torch.compile(model, backend='eager', dynamic=True)
    x = torch.randn(3, 3, 80, 112)
    valid_hw = [(57, 112), (80, 101), (61, 90)]
    with torch.no_grad():
        for got, want in zip(compiled(x, valid_hw), model(x, valid_hw)):
            assert relative_error(got, want) < 1e-5
