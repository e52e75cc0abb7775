"""inline_dense.analysis' benchmark library and the two CLIs over it: small sizes, CPU, one run."""
import argparse
import json
import math
import sys
from pathlib import Path

import pytest
import torch

from helpers import import_tool
from inline_dense.analysis import ablation, jobs, report, rows, timing, zoo
from inline_dense.analysis.worker import run_worker
from inline_dense.runtime import inline_impl, inline_layers

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def keep_torch_threads():
    """Jobs with ``threads`` set change torch's thread count; put it back after each test."""
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def tiny_job(**kw) -> jobs.Job:
    return jobs.Job(**dict(dict(model='inline-pvt-t', height=64, width=64, warmup=0, runs=1, threads=1), **kw))


def has_cswin() -> bool:
    import inline_dense.models as models
    return hasattr(models, 'InLineCSwin')


# ----------------------------------------------------------------------------- zoo
def test_zoo_names_defaults_and_errors():
    names = zoo.backbone_zoo()
    assert set(zoo.DEFAULT_MODELS) <= set(names)
    assert 'inline-cswin-t' in names
    with pytest.raises(ValueError, match='choose from'):
        zoo.build_backbone('inline-nope')
    assert 'unknown model' in zoo.check_entries(['nope'], [])
    assert 'not found' in zoo.check_entries([], ['/no/such/config.py'])
    assert zoo.check_entries(['swin-t'], []) is None
    assert zoo.model_entries(['swin-t'], ['a/b/retina_x.py']) == [('swin-t', None), ('retina_x', 'a/b/retina_x.py')]


@pytest.mark.skipif(not has_cswin(), reason='inline_dense.models has no InLineCSwin in this checkout')
def test_inline_cswin_builds_and_its_inline_layers_are_counted():
    from inline_dense.analysis import count_flops
    from inline_dense.layers.inline_attention import InLineAttention
    model = zoo.build_backbone('inline-cswin-t').eval()
    attns = [m for m in model.modules() if isinstance(m, InLineAttention)]
    assert attns, 'InLineCSwin should use InLineAttention'
    seen = []
    for a in attns:
        a.register_forward_pre_hook(lambda mod, args: seen.append(mod.impl))
    report = count_flops(model, torch.randn(1, 3, 64, 64))
    assert seen
    assert set(seen) == {'reference'}  # every InLine layer counted on its textbook path
    assert 0 < report.attention < report.total
    assert report.params > 20e6
    assert all(a.impl == 'auto' for a in attns)


# ----------------------------------------------------------------------------- timing, rows
def test_time_calls_warms_up_then_times():
    calls = []
    wall, cpu = timing.time_calls(lambda: calls.append(1), warmup=2, runs=3)
    assert len(calls) == 5
    assert len(wall) == len(cpu) == 3
    assert all(t >= 0 for t in wall)
    with pytest.raises(ValueError, match='infer'):
        timing.make_step(torch.nn.Identity(), torch.zeros(1), 'bogus')


def test_pool_merges_rounds_and_keeps_errors():
    job = tiny_job()
    a = dict(job.row(1).to_dict(), times_ms=[10.0, 30.0], median_ms=20.0, peak_mib=5.0, cpu_ms=9.0)
    b = dict(job.row(1).to_dict(), times_ms=[20.0], median_ms=20.0, peak_mib=7.0, cpu_ms=11.0)
    merged = rows.pool([a, job.error_row('boom'), b])
    assert merged['times_ms'] == [10.0, 30.0, 20.0]
    assert merged['median_ms'] == 20.0
    assert merged['throughput'] == pytest.approx(50.0)
    assert merged['peak_mib'] == 6.0
    assert merged['peak_mib_rounds'] == [5.0, 7.0]
    assert merged['median_ms_rounds'] == [20.0, 20.0]
    failed = rows.pool([job.error_row('boom')])
    assert failed['error'] == 'boom'
    assert math.isnan(failed['median_ms'])
    assert failed['model'] == 'inline-pvt-t'


def test_plan_jobs_labels_and_skip_globs():
    planned = jobs.plan_jobs(zoo.model_entries(['swin-t', 'pvt-t'], []), [(64, 64), (96, 128)],
                             ['infer', 'train'], skip=['pvt-t@96x128:*', '*:train'], runs=1)
    assert [j.label for j in planned] == ['swin-t@64x64:infer', 'swin-t@96x128:infer', 'pvt-t@64x64:infer']
    assert all(j.runs == 1 for j in planned)
    assert jobs.parse_hw('800x1216') == (800, 1216)
    for bad in ('800', '0x5', 'axb'):
        with pytest.raises(argparse.ArgumentTypeError, match=r'HxW|positive'):
            jobs.parse_hw(bad)


@pytest.mark.parametrize('mode', ['infer', 'train'])
def test_measure_one_tiny_model(mode):
    row = jobs.measure_job(tiny_job(mode=mode)).to_dict()
    assert not row['error']
    assert len(row['times_ms']) == 1
    assert row['threads'] == 1
    assert row['median_ms'] > 0
    assert row['throughput'] == pytest.approx(1e3 / row['median_ms'])
    assert row['peak_mib'] >= 0
    assert row['memory_method'] in ('VmHWM', 'sampled')
    assert row['pixels'] == 64 * 64


def test_worker_prints_a_result_or_an_error_row(capsys):
    run_worker(json.dumps(vars(tiny_job(model='inline-nope'))))
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(jobs.RESULT_PREFIX)
    row = json.loads(line[len(jobs.RESULT_PREFIX):])
    assert row['model'] == 'inline-nope'
    assert 'unknown model' in row['error']


def test_subprocess_timeout_gives_an_error_row():
    row = jobs.run_in_subprocess(tiny_job(), timeout=0.01)
    assert row['error'].startswith('timed out')
    assert row['height'] == 64


# ----------------------------------------------------------------------------- one layer
def test_layer_variants_compute_the_same_function():
    table = ablation.layer_variants((6, 8), 32, 2, ablation=True)
    with torch.no_grad():
        out = {name: fn() for name, fn in table.items()}
    for name in ('inline-reference', 'reference+channels-last', 'folded-keys'):
        torch.testing.assert_close(out[name], out['inline'], rtol=1e-4, atol=1e-5)
    wall, cpu = ablation.measure_layer((6, 8), 32, 2, rounds=1, warmup=0, ablation=True)
    result = ablation.layer_rows(wall, cpu)
    assert set(result) == set(table)
    assert result['qkv+proj']['vs_projections'] == 1.0


def test_impl_switch_is_scoped():
    from inline_dense.layers.inline_attention import InLineAttention
    attn = InLineAttention(32, 2, impl='folded_keys')
    model = torch.nn.Sequential(attn, torch.nn.Identity())
    assert inline_layers(model) == [attn]
    with inline_impl(model, 'reference'):
        assert attn.impl == 'reference'
        assert not attn.folds()
    assert attn.impl == 'folded_keys'
    with inline_impl(model, None):
        assert attn.impl == 'folded_keys'
    with pytest.raises(ValueError, match='choose from'), inline_impl(model, 'fast'):
        pass


# ----------------------------------------------------------------------------- report, CLIs
def sweep_rows():
    out = []
    for model, scale in (('inline-pvt-t', 1.0), ('pvt-t', 2.0)):
        for side in (64, 128):
            row = tiny_job(model=model, height=side, width=side).row(1).to_dict()
            t = scale * side
            out.append(dict(row, times_ms=[t], median_ms=t, throughput=1e3 / t, peak_mib=t / 2, cpu_ms=t))
    out.append(tiny_job(model='swin-t').error_row('killed'))
    return out


def test_tables_and_machine_info(capsys):
    data = sweep_rows()
    report.print_table(data)
    report.print_comparisons(data)
    text = capsys.readouterr().out
    assert 'killed' in text
    assert 'inline-pvt-t / pvt-t' in text
    assert 'time x0.50' in text
    info = report.machine_info('cpu')
    assert set(info) == {'python', 'torch', 'threads', 'cpu', 'cores', 'device'}
    assert info['python'] == '.'.join(map(str, sys.version_info[:3]))
    assert info['torch'] == torch.__version__


def test_benchmark_cli_options_and_replot(tmp_path, capsys):
    tool = import_tool('benchmark')
    args = tool.parse_args([])
    assert args.models == list(zoo.DEFAULT_MODELS)
    assert args.resolutions == [(512, 512), (800, 1216),
                                                                          (1024, 1024), (1600, 2432)]
    assert (args.modes, args.warmup, args.runs, args.rounds, args.layer_grid) == (['infer', 'train'], 2, 5, 1,
                                                                                (200, 304))
    with pytest.raises(SystemExit):
        tool.parse_args(['--models', 'inline-nope'])
    payload = dict(kind='sweep', machine=report.machine_info('cpu'), batch=1, results=sweep_rows())
    src = tmp_path / 'sweep.json'
    src.write_text(json.dumps(payload))
    tool.main(['--replot', str(src)])
    assert (tmp_path / 'sweep.png').stat().st_size > 0
    assert 'wrote' in capsys.readouterr().out


@pytest.mark.slow
def test_benchmark_cli_sweep_and_layer_smoke(tmp_path):
    tool = import_tool('benchmark')
    out = tmp_path / 'sweep.json'
    tool.main(['--models', 'inline-pvt-t', '--resolutions', '64x64', '--modes', 'infer', '--runs', '1',
               '--warmup', '0', '--threads', '1', '--out', str(out), '--no-plot'])
    payload = json.loads(out.read_text())
    assert payload['kind'] == 'sweep'
    assert len(payload['results']) == 1
    assert not payload['results'][0]['error'], payload['results'][0]['error']
    layer = tmp_path / 'layer.json'
    tool.main(['--layer', '--ablation', '--layer-grid', '6x8', '--layer-dims', '32', '--layer-heads', '2',
               '--layer-rounds', '1', '--warmup', '0', '--out', str(layer)])
    assert len(json.loads(layer.read_text())['results']) == 6


def test_get_flops_cli(tmp_path, capsys):
    tool = import_tool('get_flops')
    out = tmp_path / 'flops.json'
    tool.main(['--models', 'inline-pvt-t', '--shapes', '64x64', '--json', str(out)])
    row = json.loads(out.read_text())['results'][0]
    assert row['model'] == 'inline-pvt-t'
    assert row['macs'] == sum(row['by_op'].values()) > 0
    assert 'inline-pvt-t' in capsys.readouterr().out
    with pytest.raises(SystemExit):
        tool.parse_args(['--models', 'inline-nope'])
