"""The benchmark's precision pieces: GEMM rates, shares of them, dtype jobs and the dtype choice."""
import math

import pytest
import torch

from helpers import import_tool
from inline_dense.analysis import gemm
from inline_dense.analysis.jobs import Job
from inline_dense.runtime import precision


def test_gemm_rates_line_names_dtypes_threads_and_unit():
    rates = gemm.gemm_rates(('fp32', 'bf16'), threads=1, n=128, reps=2)
    assert rates['threads'] == 1
    assert rates['size'] == 128
    assert rates['fp32'] > 0
    assert rates['bf16'] > 0
    line = gemm.format_rates(rates)
    assert 'fp32' in line
    assert 'bf16' in line
    assert '1 thread' in line
    assert str(rates['bf16_unit']) in line
    assert '\n' not in line


def row(model, dtype, ms, cpu_ms=None, gflop=10.0, threads=1):
    return dict(model=model, height=64, width=96, mode='infer', batch=1, threads=threads, dtype=dtype,
                median_ms=ms, cpu_ms=cpu_ms if cpu_ms is not None else ms, gflop=gflop, error='')


def test_share_rows_against_each_dtypes_rate():
    rows = [row('m', 'fp32', 100.0), row('m+bf16', 'bf16', 50.0, cpu_ms=25.0),
            dict(row('x', 'fp32', 1.0), mode='train')]
    shares = gemm.share_rows(rows, {'fp32': 200.0, 'bf16': 400.0})
    assert [r['model'] for r in shares] == ['m', 'm+bf16']
    assert math.isclose(shares[0]['share_of_gemm'], 10 / 0.1 / 200)
    assert math.isclose(shares[1]['share_of_gemm'], 10 / 0.05 / 400)
    assert math.isclose(shares[1]['share_of_gemm_cpu'], 10 / 0.025 / 400)
    assert shares[0]['time_vs_fp32'] is None
    assert math.isclose(shares[1]['time_vs_fp32'], 0.5)
    assert 'x0.50' in gemm.format_shares(shares)


def test_reduced_dtype_jobs_are_labelled_and_run_under_autocast():
    from inline_dense.analysis import jobs
    job = Job('inline-swin-t', 64, 96, dtype='bf16')
    assert job.label == 'inline-swin-t+bf16@64x96:infer'
    assert job.row(1).model == 'inline-swin-t+bf16'
    seen = []
    step = jobs.autocast_step(lambda: seen.append(torch.is_autocast_enabled('cpu')), torch.device('cpu'),
                              torch.bfloat16)
    step()
    assert seen == [True]


def test_a_model_cast_to_bf16_is_measured_in_bf16_without_autocast(monkeypatch):
    from inline_dense.analysis import jobs
    seen = []
    make_step = jobs.make_step

    def recording_step(model, x, mode):
        step = make_step(model, x, mode)

        def run():
            seen.append((next(model.parameters()).dtype, x.dtype, torch.is_autocast_enabled('cpu')))
            step()
        return run
    monkeypatch.setattr(jobs, 'make_step', recording_step)
    job = Job('inline-pvt-t', 64, 64, dtype='bf16', cast='model', warmup=0, runs=1, threads=1)
    assert job.label == 'inline-pvt-t+bf16-model@64x64:infer'
    row = jobs.measure_job(job).to_dict()
    assert not row['error']
    assert (row['model'], row['dtype'], row['cast']) == ('inline-pvt-t+bf16-model', 'bf16', 'model')
    assert set(seen) == {(torch.bfloat16, torch.bfloat16, False)}
    seen.clear()
    jobs.measure_job(Job('inline-pvt-t', 64, 64, dtype='bf16', warmup=0, runs=1, threads=1))
    assert set(seen) == {(torch.float32, torch.float32, True)}
    with pytest.raises(ValueError, match='--modes infer'):
        jobs.measure_job(Job('inline-pvt-t', 64, 64, 'train', dtype='bf16', cast='model', warmup=0, runs=1))


def test_benchmark_plans_each_cast_of_a_reduced_dtype_once(monkeypatch, capsys):
    bench = import_tool('benchmark')
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)
    args = bench.parse_args(['--models', 'inline-swin-t', '--resolutions', '64x64', '--dtype', 'fp32', 'bf16',
                             '--cast', 'autocast', 'model', '--paths', 'eager', 'compiled'])
    labels = sorted(job.label for job in bench.plan_sweep(args))
    assert labels == sorted([
        'inline-swin-t@64x64:infer', 'inline-swin-t@64x64:train',
        'inline-swin-t+bf16@64x64:infer', 'inline-swin-t+bf16@64x64:train', 'inline-swin-t+bf16-model@64x64:infer',
        'inline-swin-t+compiled@64x64:infer', 'inline-swin-t+bf16+compiled@64x64:infer',
        'inline-swin-t+bf16-model+compiled@64x64:infer'])
    for bad, why in ((['--dtype', 'fp32', '--cast', 'model'], 'only fp32 is left'),
                     (['--dtype', 'bf16', '--cast', 'model', '--anchors'], '--anchors measures its own way')):
        capsys.readouterr()
        with pytest.raises(SystemExit):
            bench.parse_args(['--models', 'inline-swin-t', *bad])
        assert why in capsys.readouterr().err


def test_share_rows_compare_a_bf16_model_with_eager_fp32():
    rows = [row('m', 'fp32', 100.0), dict(row('m+bf16-model+compiled', 'bf16', 25.0), cast='model', path='compiled')]
    shares = {r['model']: r for r in gemm.share_rows(rows, {'fp32': 200.0, 'bf16': 400.0})}
    assert math.isclose(shares['m+bf16-model+compiled']['time_vs_fp32'], 0.25)
    table = gemm.format_shares(list(shares.values()))
    assert 'bf16-model' in table
    assert 'x0.25' in table


def test_benchmark_leaves_out_a_dtype_without_native_unit(monkeypatch, capsys):
    bench = import_tool('benchmark')
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: False)
    args = bench.parse_args(['--models', 'inline-swin-t', '--dtype', 'fp32', 'bf16'])
    assert args.dtype == ['fp32']
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert 'bf16' in err[0]
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)
    assert bench.parse_args(['--models', 'inline-swin-t', '--dtype', 'fp32', 'bf16']).dtype == ['fp32', 'bf16']


@pytest.mark.slow
def test_anchor_rows_on_a_tiny_backbone(tiny_backbone, monkeypatch):
    """Eager, compiled, ONNX Runtime and OpenVINO (or why not) on one tiny exported backbone; the graph
    runtimes in fp32 agree with eager fp32. The compiled rows go through dynamo's capture with eager
    kernels: inductor's own numerics are tests/runtime/test_compiling.py's (minutes per compile)."""
    import functools

    from inline_dense.deploy import anchors
    from inline_dense.deploy.anchors import anchor_rows, format_anchor_rows
    monkeypatch.setattr(anchors, 'compile_for_inference',
                        functools.partial(anchors.compile_for_inference, backend='eager'))
    torch.manual_seed(0)
    rows = anchor_rows(tiny_backbone('swin', drop_path_rate=0.0), (64, 96), threads=1, warmup=0, runs=1)
    by = {(r['runtime'], r['precision']): r for r in rows}
    assert by[('eager', 'fp32')]['rel_error'] == 0
    assert by[('onnxruntime', 'fp32')]['rel_error'] < 1e-4, by[('onnxruntime', 'fp32')]
    ov = by[('openvino', 'fp32')]
    assert (ov['error'] and 'openvino' in ov['error'].lower()) or ov['rel_error'] < 1e-4, ov
    if precision.native_bf16_cpu():
        assert by[('eager', 'bf16')]['rel_error'] < 2e-2
    # the compiled paths (dynamic and static sizes) beside eager, one row per dtype
    for path in ('compiled', 'compiled static'):
        assert by[(path, 'fp32')]['rel_error'] < 1e-4, by[(path, 'fp32')]
        assert by[(path, 'fp32')]['median_cpu_ms'] > 0
        if precision.native_bf16_cpu():
            assert by[(path, 'bf16')]['rel_error'] < 2e-2
    table = format_anchor_rows('tiny', (64, 96), rows)
    assert 'onnxruntime' in table
    if precision.native_bf16_cpu():  # the figure the hot path is judged by
        assert 'fastest bf16 path (' in table.splitlines()[-1]
