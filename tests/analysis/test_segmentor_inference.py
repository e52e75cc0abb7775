"""The Cityscapes-size segmentor figure's pieces (inline_dense.analysis.segmentor_inference): whole and
slide inference run mmseg's own ``EncoderDecoder.inference`` (slide: one pass per window of the grid),
the rows' configs exist, the ratios come from the rows, and one real job runs in a subprocess through
the benchmark's worker protocol. The toy Cityscapes UperNet stands in for the full-size models."""
import math
import os
from pathlib import Path

import pytest
import torch

from inline_dense.analysis import jobs, segmentor_inference

ROOT = Path(__file__).resolve().parents[2]
TOY = str(ROOT / 'configs' / 'toy' / 'upernet_inline-swin-mini_toy-cityscapes.py')
pytestmark = pytest.mark.usefixtures('one_thread')


def windows(model: segmentor_inference.SegmentorInference, x: torch.Tensor) -> list[tuple[int, ...]]:
    """The input shapes of every backbone + head pass ``model(x)`` makes (mmseg's encode_decode)."""
    seen = []
    encode_decode = model.segmentor.encode_decode

    def spy(inputs: torch.Tensor, metas: list) -> torch.Tensor:
        seen.append(tuple(inputs.shape[-2:]))
        return encode_decode(inputs, metas)
    model.segmentor.encode_decode = spy
    with torch.no_grad():
        out = model(x)
    assert out.shape == (1, segmentor_inference.NUM_CLASSES, *x.shape[-2:])
    return seen


def test_whole_is_one_pass_and_slide_one_pass_per_window():
    x = torch.randn(1, 3, 64, 128)
    whole = segmentor_inference.SegmentorInference(TOY, 'whole').eval()
    assert windows(whole, x) == [(64, 128)]
    assert whole.segmentor.auxiliary_head is None  # training-only
    # mmseg's grid: ceil((128 - 64) / 48) + 1 = 3 windows across, the last one flush with the edge
    slide = segmentor_inference.SegmentorInference(TOY, 'slide', crop=(64, 64), stride=(48, 48)).eval()
    assert windows(slide, x) == [(64, 64)] * 3
    # SegFormer's windows on Cityscapes' 1024x2048: three across, one down
    assert segmentor_inference.SLIDE_CROP == (1024, 1024)
    assert segmentor_inference.SLIDE_STRIDE == (768, 768)
    with pytest.raises(ValueError, match='one of whole, slide'):
        segmentor_inference.SegmentorInference(TOY, 'tensor')


def test_rows_name_existing_configs_and_the_two_sizes():
    planned = segmentor_inference.plan(str(ROOT), warmup=1, runs=1)
    assert [j.label for j in planned] == [
        'upernet_inline-swin-t@1024x2048:whole', 'upernet_swin-t@1024x2048:whole', 'upernet_swin-t@1024x2048:slide',
        'upernet_inline-deit-s@1024x2048:whole', 'upernet_inline-swin-t@2048x4096:whole']
    for job in planned:
        assert os.path.isfile(job.config), job.config
    assert 'mmseg' in planned[1].config  # mmseg's own Swin-T UperNet


def test_ratios_come_from_the_rows():
    def row(model: str, mode: str, h: int, w: int, ms: float) -> dict:
        return dict(model=model, mode=mode, height=h, width=w, median_ms=ms, cpu_ms=ms / 2, error='')
    rows = [row('upernet_inline-swin-t', 'whole', 1024, 2048, 600.0),
            row('upernet_swin-t', 'whole', 1024, 2048, 700.0),
            row('upernet_swin-t', 'slide', 1024, 2048, 1000.0),
            row('upernet_inline-swin-t', 'whole', 2048, 4096, 2500.0)]
    (_, vs_slide, bound), (_, vs_whole, _), (_, growth, growth_bound) = segmentor_inference.ratios(rows)
    assert (vs_slide, bound) == (0.6, '<= 0.8')
    assert vs_whole == pytest.approx(6 / 7)
    assert (growth, growth_bound) == (2500 / 600, '<= 4.4')
    assert segmentor_inference.ratios(rows, 'cpu_ms')[0][1] == 0.6
    assert math.isnan(segmentor_inference.ratios(rows[:1])[0][1])  # a missing row: NaN, not a crash


def test_one_job_runs_in_a_subprocess():
    job = jobs.Job('toy-upernet', 64, 128, 'slide', warmup=0, runs=1, threads=1, config=TOY)
    row = jobs.run_in_subprocess(job, timeout=600, worker=segmentor_inference.__name__)
    assert not row['error'], row['error']
    assert (row['model'], row['mode'], row['height'], row['width']) == ('toy-upernet', 'slide', 64, 128)
    assert len(row['times_ms']) == 1
    assert row['cpu_ms'] > 0
    assert row['peak_mib'] >= 0
