"""The benchmark's report against the limit: which profiler ops count as GEMM work, the non-GEMM share of a
profiled pass, the compiled path's rows (their names, their time against eager fp32), page faults per pass."""
from types import SimpleNamespace

import torch

from inline_dense.analysis import gemm
from inline_dense.analysis.jobs import Job
from inline_dense.analysis.op_share import is_gemm, non_gemm_share, split_events
from inline_dense.analysis.rows import pool


def test_gemm_class_ops():
    assert is_gemm('aten::addmm')
    assert is_gemm('mkldnn::_linear_pointwise')
    assert not is_gemm('aten::native_layer_norm')
    assert not is_gemm('## Call CompiledFxGraph abc ##')  # inductor's own loops: no GEMM inside
    # a dense convolution is a GEMM, a depthwise one (1 input channel per group) is not
    assert is_gemm('aten::mkldnn_convolution', [[1, 3, 64, 64], [96, 3, 4, 4], [96]])
    assert not is_gemm('aten::mkldnn_convolution', [[1, 96, 50, 50], [96, 1, 3, 3], [96]])


def test_split_events_counts_self_time():
    events = [SimpleNamespace(key='aten::addmm', self_cpu_time_total=6000.0, input_shapes=[]),
              SimpleNamespace(key='aten::gelu', self_cpu_time_total=3000.0, input_shapes=[]),
              SimpleNamespace(key='aten::copy_', self_cpu_time_total=1000.0, input_shapes=[])]
    share = split_events(events)
    assert share.total_ms == 10.0
    assert abs(share.non_gemm_share - 0.4) < 1e-9
    assert share.top_other[0] == ('aten::gelu', 3.0)


def test_non_gemm_share_of_a_real_pass():
    x, w = torch.randn(256, 256), torch.randn(256, 256)
    share = non_gemm_share(lambda: torch.nn.functional.gelu(x @ w))
    assert 0 < share.non_gemm_share < 1
    assert share.gemm_ms > 0


def test_compiled_rows_are_named_and_compared_with_eager_fp32():
    job = Job('inline-swin-t', 64, 64, dtype='bf16', path='compiled')
    assert job.name == 'inline-swin-t+bf16+compiled'
    assert Job('inline-swin-t', 64, 64).name == 'inline-swin-t'
    assert Job('inline-swin-t', 64, 64, path='compiled-static').name == 'inline-swin-t+compiled-static'

    def row(model, dtype, path, ms):
        return dict(model=model, dtype=dtype, path=path, mode='infer', height=64, width=64, batch=1, threads=1,
                    median_ms=ms, cpu_ms=ms, gflop=1.0, error='', non_gemm_share=0.3)
    rows = [row('m', 'fp32', 'eager', 100.0), row('m+bf16+compiled', 'bf16', 'compiled', 20.0),
            row('m+compiled', 'fp32', 'compiled', 80.0)]
    out = {r['model']: r for r in gemm.share_rows(rows, {'fp32': 10.0, 'bf16': 80.0})}
    assert out['m+bf16+compiled']['time_vs_fp32'] == 0.2
    assert out['m+compiled']['time_vs_fp32'] == 0.8
    assert out['m']['time_vs_fp32'] is None
    table = gemm.format_shares(list(out.values()))
    assert 'non-GEMM' in table.splitlines()[0]
    assert 'compiled' in table


def test_pool_keeps_faults_and_shares():
    job = Job('inline-swin-t', 64, 64)
    a = dict(job.row(1).to_dict(), times_ms=[10.0], median_ms=10.0, peak_mib=5.0, cpu_ms=9.0, faults_per_pass=3.0,
             non_gemm_share=0.2)
    b = dict(job.row(1).to_dict(), times_ms=[12.0], median_ms=12.0, peak_mib=5.0, cpu_ms=9.0, faults_per_pass=5.0,
             non_gemm_share=0.4)
    merged = pool([a, b])
    assert merged['faults_per_pass'] == 4.0
    assert abs(merged['non_gemm_share'] - 0.3) < 1e-9
