"""The scaling figure's pieces (inline_dense.analysis.scaling): the three models share one shape, the
plan covers every (model, size, mode), the issue's ratios come from the rows, and one real job runs in
a subprocess through the benchmark's worker protocol."""
import math

import pytest
import torch

from inline_dense.analysis import jobs, scaling


def test_the_three_models_share_width_depth_heads_and_give_a_stride16_map():
    x = torch.randn(1, 3, 64, 96)
    shapes = {}
    for name in scaling.MODELS:
        model = scaling.build(name, (64, 64) if name != 'inline-deit-s' else (64, 96)).eval()
        blocks = [m for m in model.modules() if type(m).__name__ in ('Block', 'TransformerBlock')]
        assert len(blocks) == scaling.DEPTH, name
        if name != 'inline-deit-s':
            with torch.no_grad():
                shapes[name] = tuple(model(torch.randn(1, 3, 64, 64)).shape)
        else:
            with torch.no_grad():
                shapes[name] = tuple(model(x)[-1].shape)
    assert shapes == {'inline-deit-s': (1, 320, 4, 6), 'vitdet-softmax': (1, 320, 4, 4),
                      'global-softmax': (1, 320, 4, 4)}
    vitdet = scaling.build('vitdet-softmax', (64, 64)).vit
    windows = [b.window_size for b in vitdet.blocks]
    assert [i for i, w in enumerate(windows) if w == 0] == list(scaling.VITDET_GLOBAL)
    assert all(w == 14 for i, w in enumerate(windows) if i not in scaling.VITDET_GLOBAL)
    assert vitdet.blocks[0].attn.use_rel_pos
    glob = scaling.build('global-softmax', (64, 64)).vit
    assert all(b.window_size == 0 and not b.attn.use_rel_pos for b in glob.blocks)
    with pytest.raises(ValueError, match='unknown model'):
        scaling.build('swin', (64, 64))


def test_plan_covers_every_model_size_and_mode():
    planned = scaling.plan(warmup=1, runs=1)
    labels = {j.label for j in planned}
    assert len(planned) == len(labels) == 3 * (4 + 3)
    assert 'inline-deit-s@4096x4096:infer' in labels
    assert 'inline-deit-s@4096x4096:train' not in labels


def test_ratios_from_rows():
    def row(model, side, mode, ms, mib=1.0):
        return dict(model=model, height=side, width=side, mode=mode, median_ms=ms, cpu_ms=ms / 2, peak_mib=mib,
                    error='')
    rows = [row('inline-deit-s', 1024, 'infer', 10), row('inline-deit-s', 2048, 'infer', 40),
            row('vitdet-softmax', 1024, 'infer', 20), row('global-softmax', 1024, 'infer', 25),
            row('global-softmax', 2048, 'infer', 400), row('inline-deit-s', 2048, 'train', 1, 300),
            row('global-softmax', 2048, 'train', 1, 200)]
    got = [v for _, v, _ in scaling.ratios(rows)]
    assert got == pytest.approx([4.0, 0.5, 0.4, 0.1, 1.5])
    rows[1]['cpu_ms'] = 30  # by CPU time: 2048² 30 against 1024²'s 5
    assert [v for _, v, _ in scaling.ratios(rows, 'cpu_ms')][:2] == pytest.approx([6.0, 0.5])
    rows[0]['error'] = 'killed'
    assert math.isnan(scaling.ratios(rows)[0][1])


@pytest.mark.slow
def test_one_job_in_a_subprocess():
    job = jobs.Job('inline-deit-s', 32, 32, 'train', warmup=0, runs=1, threads=1)
    row = jobs.run_in_subprocess(job, timeout=600, worker='inline_dense.analysis.scaling')
    assert not row['error'], row['error']
    assert row['model'] == 'inline-deit-s'
    assert row['median_ms'] > 0
    assert row['peak_mib'] > 0
