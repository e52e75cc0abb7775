"""One name check for families, variants and backbone classes (``registry.lookup``): every caller
that takes such a name answers an unknown one with the same line, naming the known ones."""
import pytest
import torch

from inline_dense import registry, variants
from inline_dense.models.classifier import InLineClassifier, build_classifier
from inline_dense.models.convert import convert_file
from inline_dense.smp_toy import ToyRunError, check_settings


def expected(kind: str, name: str, known) -> str:
    return f'unknown InLine {kind} {name!r}; use one of {sorted(known)}.'


def test_the_lookup_names_the_kind_and_every_known_name():
    with pytest.raises(registry.UnknownNameError) as err:
        registry.lookup('widget', 'c', {'b': 1, 'a': 2})
    assert str(err.value) == "unknown InLine widget 'c'; use one of ['a', 'b']."
    assert registry.lookup('widget', 'a', {'b': 1, 'a': 2}) == 2


def test_families_and_classes():
    with pytest.raises(registry.UnknownNameError) as err:
        registry.family('nope')
    assert str(err.value) == expected('family', 'nope', registry.FAMILIES)
    with pytest.raises(registry.UnknownNameError) as err:
        InLineClassifier(family='nope')
    assert str(err.value) == expected('family', 'nope', registry.FAMILIES)
    classes = [spec.class_name for spec in registry.FAMILIES.values()]
    with pytest.raises(registry.UnknownNameError) as err:
        registry.family_by_class('InLineNope')
    assert str(err.value) == expected('backbone class', 'InLineNope', classes)
    for spec in registry.FAMILIES.values():
        assert registry.family_by_class(spec.class_name) is spec is registry.family(spec.name)


def test_variants_through_each_caller():
    line = expected('variant', 'inline_nope_t', variants.VARIANTS)
    for call in (lambda: variants.variant('inline_nope_t'), lambda: build_classifier('inline_nope_t')):
        with pytest.raises(registry.UnknownNameError) as err:
            call()
        assert str(err.value) == line
    with pytest.raises(ToyRunError) as err:  # the toy tool's own error type, the same line
        check_settings('UPerNet', 'inline_nope_t', 10.0, 1, 2, 1e-3)
    assert str(err.value) == line


def test_the_converter_checks_the_backbone_name_before_reading_keys(tmp_path):
    src = tmp_path / 'src.pth'
    torch.save({'state_dict': {'some.weight': torch.zeros(1)}}, src)
    classes = [spec.class_name for spec in registry.FAMILIES.values()]
    with pytest.raises(registry.UnknownNameError) as err:
        convert_file(str(src), str(tmp_path / 'out.pth'), backbone='InLineNope')
    assert str(err.value) == expected('backbone class', 'InLineNope', classes)
    assert not (tmp_path / 'out.pth').exists()
