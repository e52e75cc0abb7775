"""The compiled inference path every tool takes (``inline_dense.runtime.compiling``): what it compiles, that
the test pipelines' padded sizes share one graph, that it says when it compiles, that it falls back to eager
in one line without a C++ compiler, and that its results stay within the bf16 bound of eager."""
import io

import pytest
import torch
from torch import nn
from torch._dynamo.testing import CompileCounter

from helpers import TINY_KINDS, build_tiny, compiling_with
from inline_dense.runtime import compiling

# batch 1 at sizes a test pipeline pads to (multiples of 32), each with its image's real size: the masks
# change with every image, the graph must not
PIPELINE = [((1, 3, 256, 352), [(250, 340)]), ((1, 3, 288, 320), [(280, 300)]), ((1, 3, 320, 320), [(311, 300)]),
            ((1, 3, 256, 384), [(256, 370)])]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def counting(monkeypatch) -> CompileCounter:
    """compile_for_inference with a dynamo backend that counts graphs and runs them eagerly."""
    counter = CompileCounter()
    compiling_with(monkeypatch, counter)
    return counter


@pytest.mark.parametrize('kind', TINY_KINDS)
def test_pipeline_sizes_share_one_graph(kind, monkeypatch):
    counter = counting(monkeypatch)
    model = build_tiny(kind).eval()
    assert compiling.compile_for_inference(model, backend='eager', stream=io.StringIO())
    with torch.no_grad():
        for shape, valid_hw in PIPELINE:
            model(torch.randn(*shape), valid_hw)
    assert counter.frame_count == 1


@pytest.mark.parametrize('bf16', ['autocast', 'model'])
def test_bf16_pipeline_sizes_share_one_graph_and_match_eager(monkeypatch, bf16):
    """Under bfloat16 autocast, or cast to bfloat16 (``model.bfloat16()``), the compiled InLine attention takes
    eager's bfloat16 route (the centred Gram where a stage has more tokens than channels) through a
    ``torch.cond`` on the token count: sizes on both sides of that count share the graph, and the results stay
    within the bf16 bound of eager."""
    from inline_dense.runtime.precision import native_bf16_cpu
    if not native_bf16_cpu():
        pytest.skip('this CPU has no native bfloat16')
    counter = counting(monkeypatch)
    torch.manual_seed(0)
    eager = build_tiny('deit').eval()  # a plain ViT: no single-window size that dynamo would specialise
    model = build_tiny('deit').eval()
    model.load_state_dict(eager.state_dict())
    if bf16 == 'model':
        eager, model = eager.bfloat16(), model.bfloat16()
    compiling.compile_for_inference(model, backend='eager', stream=io.StringIO())
    # 13 tokens for 16 channels, then hundreds
    sizes = [((1, 3, 48, 64), [(44, 60)]), *PIPELINE[:2]]
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=bf16 == 'autocast'):
        for shape, valid_hw in sizes:
            x = torch.randn(*shape, dtype=torch.bfloat16 if bf16 == 'model' else torch.float32)
            for o, r in zip(model(x, valid_hw), eager(x, valid_hw)):
                assert ((o.float() - r.float()).norm() / r.float().norm()).item() < 2e-2
    assert counter.frame_count == 1


def test_images_on_the_block_grid_reach_the_graph_in_static_blocks(monkeypatch):
    """With dynamic sizes an image whose sides are multiples of 32 reaches its graph as 32 x 32 blocks: the block
    sides are static, only the block counts are symbols (so every stage's side is a multiple of one symbol, not a
    nest of ceiling divisions). Sides off that grid take one second graph, which the next such size shares."""
    images = []

    def recording(gm, example_inputs):
        values = [n.meta['example_value'] for n in gm.graph.nodes if n.op == 'placeholder']
        images.append(next(tuple(v.shape) for v in values if isinstance(v, torch.Tensor) and v.dim() >= 4))
        return gm.forward
    compiling_with(monkeypatch, recording)
    eager = build_tiny('swin').eval()
    model = build_tiny('swin').eval()
    model.load_state_dict(eager.state_dict())
    compiling.compile_for_inference(model, backend='eager', stream=io.StringIO())
    off_grid = [((1, 3, 250, 340), [(250, 340)]), ((1, 3, 270, 300), [(270, 290)])]
    with torch.no_grad():
        for shape, valid_hw in PIPELINE + off_grid:
            x = torch.randn(*shape)
            out, ref = model(x, valid_hw), eager(x, valid_hw)
            for o, r in zip(out, ref):
                torch.testing.assert_close(o, r)
    assert len(images) == 2, images
    blocked, plain = images
    assert len(blocked) == 6, blocked
    assert [type(side) for side in blocked[3::2]] == [int, int], blocked  # not SymInts
    assert blocked[3] == blocked[5] == compiling.BLOCK, blocked
    assert all(isinstance(side, torch.SymInt) for side in (blocked[2], blocked[4], plain[2], plain[3])), images


def test_static_sizes_compile_a_graph_per_size(monkeypatch):
    counter = counting(monkeypatch)
    model = build_tiny('swin').eval()
    out = io.StringIO()
    compiling.compile_for_inference(model, backend='eager', stream=out, sizes='static')
    with torch.no_grad():
        for shape, valid_hw in PIPELINE[:2] + PIPELINE[:1]:
            model(torch.randn(*shape), valid_hw)
    assert counter.frame_count == 2
    assert 'sizes static' in out.getvalue()
    with pytest.raises(ValueError, match="sizes='fixed' is not one of"):
        compiling.compile_for_inference(build_tiny('swin'), backend='eager', sizes='fixed')


@pytest.mark.skipif(compiling.compiler_problem() is not None, reason='no C++ compiler for inductor')
@pytest.mark.parametrize(('sizes', 'cpp_wrapper'), [('dynamic', False), ('static', True)])
def test_static_graphs_run_from_the_cpp_wrapper(monkeypatch, sizes, cpp_wrapper):
    """Inductor's options: freezing always; its C++ wrapper for static sizes only (a few percent of a pass for a
    few seconds of compiling; with dynamic sizes far more compiling for less), and the announcement says so."""
    asked = compiling_with(monkeypatch, 'eager')
    out = io.StringIO()
    model = build_tiny('swin').eval()
    assert compiling.compile_for_inference(model, stream=out, sizes=sizes)
    with torch.no_grad():
        model(torch.randn(1, 3, 64, 96))
    # with dynamic sizes two callables, one for images in 32-pixel blocks and one for any other input
    assert asked == [{'freezing': True, 'cpp_wrapper': cpp_wrapper}] * (2 if sizes == 'dynamic' else 1)
    assert ('C++ wrapper' in out.getvalue()) is cpp_wrapper


@pytest.mark.skipif(compiling.compiler_problem() is not None, reason='no C++ compiler for inductor')
def test_inductor_freezes_the_weights():
    """Freezing is in effect (``torch.compile``'s options alone do not freeze): the weights are constants of
    the graph, so a weight changed after the first call is not seen."""
    model = nn.Sequential(nn.Linear(8, 8)).eval()
    compiling.compile_for_inference(model, stream=io.StringIO())
    x = torch.randn(4, 8)
    with torch.no_grad():
        first = model(x)
        model[0].weight.add_(1.0)
        again = model(x)
    assert torch.equal(first, again)
    compiling.uncompile(model)
    with torch.no_grad():
        assert not torch.allclose(model(x), first)


@pytest.mark.parametrize(('kind', 'amp'), [('swin', False), ('pvt', False), ('swin', True)])
def test_batches_above_one_share_one_graph(kind, amp, monkeypatch):
    """Without a padding mask every batch of 2 or more shares a graph (batch 1 is a graph of its own:
    dynamo specialises a size of 1); under bf16 autocast too (InLine's centred bf16 Gram)."""
    from inline_dense.runtime.precision import native_bf16_cpu
    if amp and not native_bf16_cpu():
        pytest.skip('this CPU has no native bfloat16')
    counter = counting(monkeypatch)
    model = build_tiny(kind).eval()
    compiling.compile_for_inference(model, backend='eager', stream=io.StringIO())
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=amp):
        for b, h, w in [(2, 256, 320), (3, 288, 352), (4, 256, 384)]:
            model(torch.randn(b, 3, h, w))
    assert counter.frame_count == 1


def test_parts_and_uncompile_keep_the_module():
    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = build_tiny('swin')
            self.neck = nn.Conv2d(16, 8, 1)
            self.roi_head = nn.Linear(4, 4)

    det = Detector().eval()
    keys = list(det.state_dict())
    assert [n for n, _ in compiling.parts_to_compile(det)] == ['backbone', 'neck']
    compiling.compile_for_inference(det, backend='eager', stream=io.StringIO())
    assert 'forward' in det.backbone.__dict__
    assert 'forward' not in det.roi_head.__dict__
    assert list(det.state_dict()) == keys
    assert isinstance(det.backbone, type(build_tiny('swin')))
    compiling.compile_for_inference(det, backend='eager', stream=io.StringIO())  # idempotent
    compiling.uncompile(det)
    assert 'forward' not in det.backbone.__dict__
    assert 'forward' not in det.neck.__dict__
    backbone = build_tiny('pvt')
    assert compiling.parts_to_compile(backbone) == [('InLinePVT', backbone)]


def test_first_compile_says_so_with_its_time():
    out = io.StringIO()
    model = build_tiny('deit').eval()
    compiling.compile_for_inference(model, backend='eager', stream=out)
    with torch.no_grad():
        model(torch.randn(1, 3, 64, 96))
        model(torch.randn(1, 3, 64, 96))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith('[compile] InLineDeiT: compiled for 1x3x64x96 in '), lines


def test_without_a_cpp_compiler_one_line_and_eager(monkeypatch):
    compiling.compiler_problem.cache_clear()
    import torch._inductor.config as inductor_config
    monkeypatch.setattr(inductor_config.cpp, 'cxx', ('/nonexistent/bin/c++',))
    try:
        out = io.StringIO()
        model = build_tiny('swin').eval()
        assert not compiling.compile_for_inference(model, stream=out)
        assert 'forward' not in model.__dict__
        lines = out.getvalue().splitlines()
        assert len(lines) == 1, lines
        assert 'C++ compiler' in lines[0], lines
        assert lines[0].endswith('running eagerly'), lines
    finally:
        compiling.compiler_problem.cache_clear()


@pytest.mark.slow
@pytest.mark.timeout(2400)  # an inductor compile: a few minutes alone, far more on a loaded machine
@pytest.mark.skipif(compiling.compiler_problem() is not None, reason='no C++ compiler for inductor')
@pytest.mark.parametrize(('kind', 'dtype'), [('swin', 'fp32'), ('swin', 'bf16'), ('cswin', 'fp32')])
def test_inductor_matches_eager_within_the_bf16_bound(kind, dtype):
    """The real path (inductor, freezing, dynamic sizes, the image in 32-pixel blocks) on a small InLine-Swin
    (InLine and softmax stages, a shifted window) and a tiny InLine-CSwin (stripes, LePE's depthwise conv on a
    full-map stripe): within 2e-2 of eager (1e-4 in fp32) at two pipeline sizes, one graph for both."""
    from torch._dynamo.utils import counters

    from inline_dense.runtime.precision import native_bf16_cpu
    if dtype == 'bf16' and not native_bf16_cpu():
        pytest.skip('this CPU has no native bfloat16')
    torch.manual_seed(0)
    small = dict(depths=(1, 1, 2, 1), attn_type='IISS') if kind == 'swin' else {}
    eager = build_tiny(kind, **small).eval()
    model = build_tiny(kind, **small).eval()
    model.load_state_dict(eager.state_dict())
    compiling.compile_for_inference(model, stream=io.StringIO())
    counters.clear()
    bound = 2e-2 if dtype == 'bf16' else 1e-4
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16, enabled=dtype == 'bf16'):
        for shape, valid_hw in PIPELINE[:2]:
            x = torch.randn(*shape)
            out, ref = model(x, valid_hw), eager(x, valid_hw)
            for o, r in zip(out, ref):
                assert ((o.float() - r.float()).norm() / r.float().norm()).item() < bound
    assert counters['stats']['unique_graphs'] == 1
