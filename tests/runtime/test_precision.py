"""The precision choice every tool shares (inline_dense.runtime.precision), with the CPU's
capability faked both ways, and bf16 accuracy per family at small sizes (any CPU: torch emulates
bfloat16 where the CPU lacks it, so correctness is checkable everywhere; speed is the benchmark's)."""
import copy

import pytest
import torch

from inline_dense.runtime import precision


@pytest.fixture
def fake_cpu(monkeypatch):
    """fake_cpu(flags, onednn): the CPU flags and oneDNN's verdict the module sees."""
    def fake(flags, onednn=False):
        monkeypatch.setattr(precision, 'cpu_flags', lambda: frozenset(flags))
        monkeypatch.setattr(precision, 'mkldnn_bf16', lambda: onednn)
    return fake


@pytest.mark.parametrize(('flags', 'onednn', 'native', 'unit'), [
    ({'avx512f', 'avx512_bf16'}, False, True, 'AVX512-BF16'),
    ({'amx_bf16', 'amx_tile', 'avx512_bf16'}, False, True, 'AMX'),
    ({'avx2'}, True, True, 'AVX512-BF16'),
    ({'avx2', 'fma'}, False, False, 'none (emulated)'),
])
def test_capability_from_flags_or_onednn(fake_cpu, flags, onednn, native, unit):
    fake_cpu(flags, onednn)
    assert precision.native_bf16_cpu() is native
    assert precision.cpu_bf16_unit() == unit
    assert (precision.check_dtype(torch.bfloat16, 'cpu') is None) is native


def test_amp_dtype_native_cpu_is_bf16_silently(fake_cpu, capsys):
    fake_cpu({'avx512_bf16'})
    assert precision.amp_dtype('cpu') == torch.bfloat16
    assert capsys.readouterr().err == ''


def test_amp_dtype_without_native_bf16_falls_back_in_one_line(fake_cpu, capsys):
    fake_cpu({'avx2'})
    assert precision.amp_dtype('cpu') is None
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert 'float32' in err
    assert 'bfloat16' in err


def test_amp_dtype_cuda_is_fp16_whatever_the_cpu(fake_cpu):
    fake_cpu(set())
    assert precision.amp_dtype('cuda') == torch.float16


def test_real_flags_and_onednn_agree_with_each_other():
    """On this machine: a CPU whose flags list avx512_bf16 / amx_bf16 is one oneDNN runs bf16 on."""
    from_flags = bool(precision.cpu_flags() & set(precision.BF16_CPU_FLAGS))
    if from_flags and torch.backends.mkldnn.is_available():
        assert precision.mkldnn_bf16()


def test_parse_and_check_dtype():
    assert precision.parse_dtype('bf16') == torch.bfloat16
    with pytest.raises(ValueError, match='fp32'):
        precision.parse_dtype('int8')
    assert precision.check_dtype(torch.float32, 'cpu') is None
    assert 'fp16' in precision.check_dtype(torch.float16, 'cpu')


def test_autocast_context_is_noop_for_fp32():
    with precision.autocast('cpu', None):
        assert not torch.is_autocast_enabled('cpu')
    with precision.autocast('cpu', torch.bfloat16):
        assert torch.is_autocast_enabled('cpu')
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.bfloat16


def test_bf16_backbone_inference_within_2e2_of_fp32(kind, tiny_backbone):
    """Every family's backbone (InLine-DeiT included), inference under bf16 autocast at 256x384, weights at
    the scale of trained ones: each stage's output within 2e-2 relative L2 of float32 (the bf16 accuracy bound;
    measured values with ``pytest -s``; the detection-size figures: ``benchmark.py --dtype-error``)."""
    torch.manual_seed(0)
    model = precision.trained_scale_(tiny_backbone(kind, drop_path_rate=0.0)).eval()
    x = torch.randn(1, 3, 256, 384, generator=torch.Generator().manual_seed(5))
    errs = precision.autocast_errors(model, x, torch.bfloat16)
    print(f'\n{kind} bf16 per-stage rel L2 {[f"{e:.1e}" for e in errs]}')
    assert len(errs) == len(model(x)), errs
    assert min(errs) > 0, 'autocast changed nothing: it did not reach the backbone'
    assert max(errs) < 2e-2, errs



def test_bf16_model_inference_within_2e2_of_fp32(kind, tiny_backbone):
    """Every family's backbone cast to bfloat16 (``model.bfloat16()``, no autocast: weights and activations in
    bfloat16, as a deployment that casts the model runs it) at 256x384: bfloat16 stage outputs, each within 2e-2
    relative L2 of float32."""
    torch.manual_seed(0)
    model = precision.trained_scale_(tiny_backbone(kind, drop_path_rate=0.0)).eval()
    x = torch.randn(1, 3, 256, 384, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        exact = model(x)
        got = copy.deepcopy(model).bfloat16()(x.bfloat16())
    errs = [((g.double() - e.double()).norm() / e.double().norm()).item() for g, e in zip(got, exact, strict=True)]
    print(f'\n{kind} bf16 model per-stage rel L2 {[f"{e:.1e}" for e in errs]}')
    assert all(g.dtype == torch.bfloat16 for g in got)
    assert max(errs) < 2e-2, errs

def test_autocast_errors_measure_the_rounding_of_the_dtype():
    """float16 keeps 3 more mantissa bits than bfloat16: its error on the same linear layer is ~8x smaller."""
    layer = precision.trained_scale_(torch.nn.Linear(64, 64))
    x = torch.randn(256, 64, generator=torch.Generator().manual_seed(0))
    (bf16,) = precision.autocast_errors(layer, x, torch.bfloat16)
    (fp32,) = precision.autocast_errors(layer, x, torch.float32)
    assert fp32 == 0, fp32
    assert 1e-3 < bf16 < 2e-2, bf16
    if torch.cuda.is_available() or precision.check_dtype(torch.float16, 'cpu') is None:
        (fp16,) = precision.autocast_errors(layer, x, torch.float16)
        assert fp16 < bf16 / 4, (fp16, bf16)


def test_trained_scale_draws_xavier_weights():
    conv = precision.trained_scale_(torch.nn.Conv2d(32, 64, 3))
    bound = (6 / (32 * 9 + 64)) ** 0.5
    assert conv.weight.abs().max() <= bound
    assert conv.weight.std() > bound / 2
    assert 0.05 < conv.bias.std() < 0.2


def test_benchmark_dtype_error_reports_each_output(tmp_path, capsys, monkeypatch):
    """``benchmark.py --dtype-error``: one row per backbone, size and reduced dtype, errors in (0, 2e-2)
    (bf16 faked native: the tool would leave it out on a CPU without, and emulated bf16 rounds the same)."""
    import json
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)

    from helpers import import_tool
    out = tmp_path / 'err.json'
    status = import_tool('benchmark').main(['--dtype-error', '--dtype', 'fp32', 'bf16', '--models', 'inline-deit-t',
                                            '--resolutions', '64x96', '--threads', '1', '--out', str(out)])
    payload = json.loads(out.read_text())
    assert status == 0
    assert payload['kind'] == 'dtype_error'
    (row,) = payload['results']
    assert (row['model'], row['height'], row['width'], row['dtype']) == ('inline-deit-t', 64, 96, 'bf16')
    assert 0 < row['max_rel_l2'] == max(row['rel_l2']) < 2e-2
    assert 'inline-deit-t 64x96 bf16: relative L2 against fp32' in capsys.readouterr().out
