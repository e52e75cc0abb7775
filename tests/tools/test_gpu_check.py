"""The GPU check's CPU dry run (``tools/gpu_check.py --device cpu --dry-run``): every step runs
the code the GPU run runs, at toy sizes, end to end; failures, hangs and the time limit are
recorded without stopping the rest; results are written as they come."""
import json
from pathlib import Path

import pytest

from helpers import import_tool
from inline_dense.layers.inline_attention import IMPLS
from inline_dense_dev.gpu_check.attention_step import DTYPES
from inline_dense_dev.gpu_check.plan import BACKBONES, STEPS, CheckPlan, dry_run_plan
from inline_dense_dev.gpu_check.results import JSON_NAME, MD_NAME, Results
from inline_dense_dev.gpu_check.runner import run_check

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / 'tests' / 'data' / 'fixtures'


def rows(payload: dict, step: str) -> dict:
    return {r['name']: r for r in payload['steps'][step]['rows']}


@pytest.mark.slow
def test_dry_run_end_to_end(tmp_path):
    out = tmp_path / 'out'
    code = import_tool('gpu_check').main(['--device', 'cpu', '--dry-run', '--out', str(out)])
    payload = json.loads((out / JSON_NAME).read_text())
    failed = {s: [r for r in e['rows'] if not r.get('ok')] or e.get('error')
              for s, e in payload['steps'].items() if e['status'] != 'ok'}
    assert code == 0, failed
    assert not failed, failed
    assert list(payload['steps']) == list(STEPS)

    ops = rows(payload, 'ops')
    assert 'stand-in' in ops['stack']['mmcv._ext']
    assert {k: ops[k]['cases'] for k in ('nms', 'batched_nms', 'roi_align avg fwd+bwd', 'roi_align max fwd+bwd')} \
        == {'nms': 12, 'batched_nms': 12, 'roi_align avg fwd+bwd': 32, 'roi_align max fwd+bwd': 32}
    assert all(ops[k]['failed'] == 0 for k in ('nms', 'roi_align avg fwd+bwd'))

    attention = rows(payload, 'attention')
    for impl in IMPLS:
        for dtype in DTYPES:
            assert attention[f'{impl} {dtype}']['finite'] is True
        assert attention[f'{impl} float32']['out_rel_err'] < 1e-5
    for shape in ('stage1', 'stage3'):
        for mode in ('infer', 'train'):
            row = attention[f'{shape} {mode}']
            assert row['fastest'] in IMPLS
            assert row['auto_picks'] in ('folded_gram', 'folded_keys')
            assert all(row[f'{impl}_ms'] > 0 for impl in IMPLS)

    backbones = rows(payload, 'backbones')
    plan = dry_run_plan('', '')
    for name in BACKBONES:
        for h, w in plan.backbone_sizes:
            for mode in ('infer', 'train'):
                assert backbones[f'{name} {h}x{w} {mode}']['median_ms'] > 0

    deform = rows(payload, 'deform_attn')
    h, w = plan.deform_size
    for name in (f'ms_deform_attn vs pure, {plan.deform_layouts} random layouts',
                 f'ms_deform_attn vs pure, DINO encoder {h}x{w}'):
        assert deform[name]['failed'] == 0
        assert deform[name]['cases'] >= 1
        assert max(v for k, v in deform[name].items() if k.endswith('_err_over_tol')) < 1
    syncs = deform[f'ms_deform_attn layout reads and syncs, DINO encoder {h}x{w}']
    assert (syncs['layout_reads'], syncs['new_layout_reads'], syncs['calls']) == (0, 1, 12)
    for impl in ('pure', 'stand-in'):
        assert deform[f'{impl} fwd+bwd, DINO encoder {h}x{w}']['median_ms'] > 0
    assert deform['stand-in / pure time']['ratio'] > 0

    query_heads = rows(payload, 'query_heads')
    for label in plan.query_heads:
        row = query_heads[f'{label} train step float32']
        assert row['loss_finite']
        assert row['grads_finite']
        assert row['median_ms'] > 0
        # the compiled-op path: the stand-in's deformable attention ran, forward and backward
        assert 'ms_deform_attn_forward=' in row['ext_calls']
        assert 'ms_deform_attn_backward=' in row['ext_calls']

    detector = rows(payload, 'detector')
    for label in plan.detectors:
        assert detector[f'{label} train step float32']['loss_finite']
        assert detector[f'{label} float32 dynamic loss scale']['losses_finite']

    toy = rows(payload, 'toy')['toy mask-rcnn demo']
    assert 0 <= toy['box_ap'] <= 1
    assert 0 <= toy['mask_ap'] <= 1
    assert (out / 'toy_predictions.png').is_file()
    md = (out / MD_NAME).read_text()
    assert all(f'## {step}: ok' in md for step in STEPS)


@pytest.mark.slow
def test_hang_and_failure_are_recorded_and_the_next_step_runs(tmp_path):
    """The toy step is killed at its 6 s budget (it is still importing); the ops step's fixture
    is missing, which fails that row only: the focal loss after it still runs."""
    plan = dry_run_plan(str(tmp_path / 'no_fixtures'), str(tmp_path))
    plan.budgets = dict(plan.budgets, toy=6)
    results = Results(str(tmp_path), {})
    assert run_check(plan, ['toy', 'ops'], results, 300, str(ROOT)) is False
    toy, ops = results.payload['steps']['toy'], results.payload['steps']['ops']
    assert toy['status'] == 'failed'
    assert 'timed out after 6 s' in toy['error']
    by_name = {r['name']: r for r in ops['rows']}
    assert ops['status'] == 'failed'
    assert 'error' not in ops
    assert by_name['load mmcv_ops_reference.pt']['ok'] is False
    assert 'FileNotFoundError' in by_name['load mmcv_ops_reference.pt']['error']
    assert by_name['sigmoid focal loss vs py_sigmoid_focal_loss']['ok'] is True


def test_deform_attn_parity_fails_a_wrong_implementation(monkeypatch):
    """The parity row compares for real: a stand-in 1e-4 off in its output fails it."""
    import random

    import torch

    from inline_dense_dev.gpu_check import deform_attn_step as step
    cases = [step.random_layout(random.Random(3), torch.device('cpu'))]
    row: dict = {}
    step.parity_row(row, cases)
    assert row['ok']
    assert row['failed'] == 0
    real = step.stand_in
    monkeypatch.setattr(step, 'stand_in', lambda *args: real(*args) * (1 + 1e-4) + 1e-4)
    row = {}
    step.parity_row(row, cases)
    assert not row['ok']
    assert row['failed'] == 1
    assert row['forward_err_over_tol'] > 1


def test_the_layout_row_fails_a_stand_in_that_reads_the_layout_at_every_call(monkeypatch):
    """The deform step's sync row: no layout read in repeated calls on one layout (on CUDA each read
    is a device sync, which the row counts there too), one read for a new layout."""
    import random

    import torch

    from inline_dense.ops import ms_deform_attn
    from inline_dense_dev.gpu_check import deform_attn_step as step
    inputs = step.random_layout(random.Random(5), torch.device('cpu'))
    row: dict = {}
    step.layout_sync_row(row, inputs)
    assert 'error' not in row, row
    assert (row['layout_reads'], row['new_layout_reads']) == (0, 1)
    monkeypatch.setattr(ms_deform_attn, '_versions', lambda *tensors: None)  # nothing remembered
    row = {}
    step.layout_sync_row(row, inputs)
    assert row['ok'] is False
    assert row['layout_reads'] == 2 * step.LAYERS
    assert '12 layout reads' in row['error']


def test_the_dry_run_routes_deformable_attention_through_the_stand_in():
    """On a CPU, mmcv calls its pure function; the query-head step sends it through mmcv._ext,
    as mmcv does on CUDA, and puts the pure function back after."""
    import random

    import mmcv.ops.multi_scale_deform_attn as msda
    import torch

    from inline_dense.openmmlab.mmcv_ops import mmcv_ext
    from inline_dense_dev.gpu_check.deform_attn_step import random_layout
    from inline_dense_dev.gpu_check.query_heads_step import compiled_op_path
    value, shapes, _, loc, weights = random_layout(random.Random(5), torch.device('cpu'))
    pure, ext = msda.multi_scale_deformable_attn_pytorch, mmcv_ext()
    before = ext.CALLS['ms_deform_attn_forward']
    with compiled_op_path(torch.device('cpu')):
        out = msda.multi_scale_deformable_attn_pytorch(value, shapes, loc, weights)
    assert ext.CALLS['ms_deform_attn_forward'] == before + 1
    assert msda.multi_scale_deformable_attn_pytorch is pure
    torch.testing.assert_close(out, pure(value, shapes, loc, weights), rtol=0, atol=1e-5)


def test_both_plans_build_every_registered_family():
    from inline_dense import registry
    for plan in (CheckPlan(), dry_run_plan('', '')):
        planned = {name.rsplit('-', 1)[0] for name in plan.backbones}
        assert {f'inline-{family}' for family in registry.FAMILIES} <= planned


def test_time_limit_leaves_steps_not_run(tmp_path):
    results = Results(str(tmp_path), {})
    assert run_check(dry_run_plan('', ''), ['ops', 'toy'], results, 0, str(ROOT)) is False
    for step in ('ops', 'toy'):
        assert 'not run' in results.payload['steps'][step]['error']


def test_results_are_written_after_every_row(tmp_path):
    results = Results(str(tmp_path), dict(device='cuda'))
    results.add_row('ops', dict(name='nms', cases=12, ok=True, max_err=0.0))
    partial = json.loads((tmp_path / JSON_NAME).read_text())
    assert partial['steps']['ops']['status'] == 'running'
    assert len(partial['steps']['ops']['rows']) == 1
    results.add_row('ops', dict(name='roi_align', cases=3, ok=False, max_err=0.5, error='cases [1] differ'))
    results.add_row('ops', dict(name='focal', ok=True))
    results.finish('ops', 1.234)
    md = (tmp_path / MD_NAME).read_text()
    assert '## ops: failed, 1.2 s' in md
    assert '| name | cases | ok | max_err | error |\n|---|---|---|---|---|\n| nms | 12 | yes | 0 |  |\n' \
           '| roi_align | 3 | NO | 0.5 | cases [1] differ |\n\n| name | ok |\n|---|---|\n| focal | yes |' in md


def test_plan_survives_the_trip_to_the_worker():
    plan = dry_run_plan('/f', '/o')
    again = CheckPlan.from_json(json.loads(json.dumps(plan.to_json())))
    assert again.to_json() == json.loads(json.dumps(plan.to_json()))
    assert again.device == 'cpu'
    assert again.dry_run
    assert again.toy_args == plan.toy_args
