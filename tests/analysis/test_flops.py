"""FLOP counting: InLine attention against a hand count, and linear vs quadratic growth."""
import json
from pathlib import Path

import pytest
import torch

from inline_dense.analysis import count_flops, count_params
from inline_dense.families.pvt.sr_attention import SRAttention
from inline_dense.layers.block import TransformerBlock
from inline_dense.layers.inline_attention import InLineAttention


def hand_count_inline(n: int, c: int, heads: int) -> int:
    """Multiply-accumulates of one InLine attention, written out term by term."""
    d = c // heads
    qkv = n * c * (3 * c)
    kv_context = heads * (d * n * d)      # K_h^T V_h: (d x n) @ (n x d) per head
    mean_outer = heads * (d * 1 * d)      # mean(k)^T mean(v): (d x 1) @ (1 x d) per head
    query_context = heads * (n * d * d)   # q_h @ ctx_h: (n x d) @ (d x d) per head
    means = 3 * n * c                     # token means of k, v and of x (for the taps)
    depthwise = n * c * 9                 # 3x3 depthwise filter
    tap_mlp = c * (c // heads) + 9 * c * (c // heads)  # two grouped 1x1 convs on the mean token
    proj = n * c * c
    return qkv + kv_context + mean_outer + query_context + means + depthwise + tap_mlp + proj


@pytest.mark.parametrize(('hw', 'c', 'heads'), [((14, 14), 96, 3), ((7, 10), 64, 2), ((5, 6), 128, 8)])
def test_inline_attention_matches_hand_count(hw, c, heads):
    n = hw[0] * hw[1]
    attn = InLineAttention(c, heads).eval()
    report = count_flops(attn, (torch.randn(1, n, c), hw))
    assert report.total == hand_count_inline(n, c, heads)
    assert report.attention == report.total  # every MAC is attributed to the attention module
    assert report.params == sum(p.numel() for p in attn.parameters())


def test_transformer_block_matches_hand_count():
    hw, c, heads, ratio = (12, 16), 96, 3, 4
    n = hw[0] * hw[1]
    block = TransformerBlock(c, InLineAttention(c, heads), mlp_ratio=ratio).eval()
    report = count_flops(block, (torch.randn(2, n, c), hw))
    mlp = n * c * (ratio * c) + n * (ratio * c) * c
    assert report.total == 2 * (hand_count_inline(n, c, heads) + mlp)  # batch of 2
    assert report.attention == 2 * hand_count_inline(n, c, heads)


def test_batch_and_fast_path_do_not_change_the_textbook_count():
    attn = InLineAttention(64, 2).eval()
    x = torch.randn(3, 80, 64)
    textbook = count_flops(attn, (x, (8, 10))).total
    assert textbook == 3 * hand_count_inline(80, 64, 2)
    executed = count_flops(attn, (x, (8, 10)), executed=True)
    assert executed.total > 0
    assert executed.total != textbook  # the fast path runs other products
    assert attn.impl == 'auto'  # counting left the module as it was


def test_inline_flops_grow_linearly_softmax_quadratically():
    c = 64
    inline = InLineAttention(c, 2).eval()
    softmax = SRAttention(c, 2, sr_ratio=1).eval()  # plain global softmax attention
    counts = {}
    for side in (16, 32):  # 4x the tokens
        x = torch.randn(1, side * side, c)
        counts[side] = (count_flops(inline, (x, (side, side))).total,
                        count_flops(softmax, (x, (side, side))).total)
    inline_growth = counts[32][0] / counts[16][0]
    softmax_growth = counts[32][1] / counts[16][1]
    assert 3.95 < inline_growth <= 4.0
    # n*n*c attention products dominate at these sizes: growth approaches 16
    assert softmax_growth > 10


def test_backbone_count_is_linear_in_pixels_and_sees_attention():
    from inline_dense.models import InLinePVT
    model = InLinePVT(embed_dims=(16, 32, 64, 128), depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8),
                      mlp_ratios=(2, 2, 2, 2)).eval()
    small = count_flops(model, torch.randn(1, 3, 128, 128))
    large = count_flops(model, torch.randn(1, 3, 256, 256))
    assert 3.9 < large.total / small.total <= 4.0
    assert 0 < small.attention < small.total
    assert 'bmm' in small.by_op  # the per-head products are counted, not skipped
    assert small.params == count_params(model)


def test_count_params_counts_shared_tensors_once():
    """A weight tied between two layers (and a layer used twice) counts once; summing each
    module's own parameters counts them again."""
    a, b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4, bias=False)
    b.weight = a.weight  # tied
    model = torch.nn.Sequential(a, b, a)
    per_module = sum(p.numel() for _, m in model.named_modules(remove_duplicate=False)
                     for p in m.parameters(recurse=False))
    assert per_module == 3 * (4 * 4) + 2 * 4  # a twice (weight + bias), b's tied weight
    assert count_params(model) == 4 * 4 + 4


def test_inline_attention_in_any_container_is_counted_textbook():
    """The InLine mapping goes by module type, so InLine layers inside any backbone
    (Swin, PVT, CSwin blocks) are counted for the textbook algorithm."""
    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([InLineAttention(32, 2), InLineAttention(32, 4)])

        def forward(self, x, hw):
            for blk in self.blocks:
                x = blk(x, hw)
            return x
    report = count_flops(Wrapper().eval(), (torch.randn(1, 48, 32), (6, 8)))
    assert report.total == hand_count_inline(48, 32, 2) + hand_count_inline(48, 32, 4)
    assert report.attention == report.total


def test_readme_figures_at_224():
    """Params and MACs of the README's FLOP table (benchmarks/flops.json) at 224x224."""
    from inline_dense.analysis.zoo import build_backbone, init_model
    recorded = json.loads((Path(__file__).resolve().parents[2] / 'benchmarks' / 'flops.json').read_text())
    rows = {r['model']: r for r in recorded['results'] if (r['height'], r['width']) == (224, 224)}
    assert set(rows) == {'inline-swin-t', 'swin-t', 'inline-pvt-t', 'pvt-t'}
    for name, row in rows.items():
        model = build_backbone(name)
        init_model(model)
        model.eval()  # (mmdet's SwinTransformer.train returns None: no chaining)
        report = count_flops(model, torch.randn(1, 3, 224, 224))
        assert (report.params, report.total, report.attention, report.by_op) == \
            (row['params'], row['macs'], row['attention_macs'], row['by_op']), name
