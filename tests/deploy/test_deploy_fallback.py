"""``export_with_fallback``: which evaluation exports, and the caller's model left as it was.

The exporter is replaced by a stand-in that fails for chosen evaluations, so these tests check the
fallback's bookkeeping in milliseconds; tests/deploy/test_export_onnx.py runs the real exporter."""

import pytest
from torch import nn

from inline_dense.deploy import onnx_export
from inline_dense.layers.inline_attention import InLineAttention


def two_layers() -> nn.Module:
    return nn.Sequential(InLineAttention(16, 2, impl='auto'), InLineAttention(16, 2, impl='folded_gram'))


def fake_exporter(monkeypatch: pytest.MonkeyPatch, fails_with: list[str]) -> list[list[str]]:
    """Replaces export_onnx: it raises while any InLine layer runs an impl in ``fails_with``;
    returns the layers' impls seen at each call."""
    seen: list[list[str]] = []

    def export(module, path, output_names, example_shape, opset):
        impls = [m.impl for m in module.modules() if isinstance(m, InLineAttention)]
        seen.append(impls)
        if set(impls) & set(fails_with):
            raise RuntimeError(f'cannot export {impls}')
        return {'H': (32, None)}

    monkeypatch.setattr(onnx_export, 'export_onnx', export)
    return seen


def test_fallback_exports_with_another_impl_and_puts_the_layers_back(monkeypatch):
    model = two_layers()
    seen = fake_exporter(monkeypatch, fails_with=['auto', 'folded_gram', 'folded_keys'])
    used, ranges = onnx_export.export_with_fallback(model, 'unused.onnx', ['out'], log=lambda _: None)
    assert used == 'reference'
    assert ranges == {'H': (32, None)}
    assert seen == [['auto', 'folded_gram'], ['folded_keys'] * 2, ['reference'] * 2]
    assert [m.impl for m in model] == ['auto', 'folded_gram']


def test_a_model_that_exports_as_it_is_is_not_touched(monkeypatch):
    model = two_layers()
    seen = fake_exporter(monkeypatch, fails_with=[])
    used, _ = onnx_export.export_with_fallback(model, 'unused.onnx', ['out'], log=lambda _: None)
    assert used is None
    assert seen == [['auto', 'folded_gram']]
    assert [m.impl for m in model] == ['auto', 'folded_gram']


def test_when_every_impl_fails_the_error_names_them_and_the_layers_are_back(monkeypatch):
    model = two_layers()
    fake_exporter(monkeypatch, fails_with=[*onnx_export.FALLBACK_IMPLS, 'auto', 'folded_gram'])
    with pytest.raises(RuntimeError, match='failed with every attn_impl'):
        onnx_export.export_with_fallback(model, 'unused.onnx', ['out'], log=lambda _: None)
    assert [m.impl for m in model] == ['auto', 'folded_gram']
