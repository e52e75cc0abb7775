"""The contract every backbone family keeps, for every family of the registry and every ecosystem:
its spec agrees with its model; it builds, gives the outputs its spec says at any size, matches the
authors' fixture and converts their checkpoint layout; it traces, scripts and compiles; and timm,
smp, torchvision, transformers and OpenMMLab take it. A new family is covered by adding its spec
(and its fixture): nothing here names one.

The detailed behaviour (padding, freezing, errors, each ecosystem's options) is tested per area in
the other folders; this module is the checklist that a new family cannot skip."""
import ast
import dataclasses
import math
import re
import sys
from pathlib import Path

import pytest
import torch
from reference_models import authors_checkpoint, build_reference_backbone, load_reference

import inline_dense.models
from helpers import SMALLEST
from inline_dense import registry
from inline_dense.families import backbone_class
from inline_dense.families.spec import FamilySpec
from inline_dense.models.convert import detect_backbone
from inline_dense.models.tracing import FX_LEAF_MODULES

FAMILIES = list(registry.FAMILIES)
SIZES = ((65, 97), (40, 33))  # odd sides, not multiples of any stride
TOL = 1e-5  # as tests/families/test_fidelity.py


def spec_of(family: str) -> FamilySpec:
    return registry.FAMILIES[family]


def tiny(family: str, **overrides) -> torch.nn.Module:
    """The family's core backbone on its spec's tiny settings (every kind of block), in eval."""
    spec = spec_of(family)
    torch.manual_seed(0)
    return backbone_class(spec)(**dict(spec.tiny, drop_path_rate=0.0, **overrides)).eval()


def expected_shapes(model: torch.nn.Module, batch: int, hw) -> list:
    info = model.output_info()
    return [(batch, info[i]['num_chs'], math.ceil(hw[0] / info[i]['reduction']),
             math.ceil(hw[1] / info[i]['reduction'])) for i in model.out_indices]


def same(a, b, tol: float = 1e-5) -> bool:
    return len(a) == len(b) and all(x.shape == y.shape and torch.allclose(x, y, atol=tol, rtol=tol)
                                    for x, y in zip(a, b))


def one_stride(spec: FamilySpec) -> bool:
    """A plain backbone (one map stride for every output, a ViT): smp's decoders refuse it in one line;
    torchvision's FPN gets ViTDet's simple pyramid."""
    return len({o.stride for o in spec.preset_outputs(spec.weights[0].preset)}) == 1


def state_keys(path: str) -> list:
    obj = torch.load(path, weights_only=True)
    return list(obj.get('model', obj))


# ---------------------------------------------------------------- the spec and the model agree
@pytest.mark.parametrize('family', FAMILIES)
def test_the_spec_and_the_model_agree(family):
    spec = spec_of(family)
    cls = backbone_class(spec)
    assert spec.name == family
    assert cls.__name__ == spec.class_name
    assert cls.__module__ == spec.model_module
    assert cls.arch_zoo is spec.presets
    assert getattr(inline_dense.models, spec.class_name) is cls
    assert spec.class_name in inline_dense.models.__all__
    assert spec.weights
    assert all(w.preset in spec.presets for w in spec.weights)
    assert all(w.name.startswith(f'inline_{family}_') for w in spec.weights)
    assert set(spec.configs.drop_path) == set(spec.presets)
    for key, rate in spec.configs.drop_path.items():
        assert 0 <= rate < 1, (key, rate)


@pytest.mark.parametrize('family', FAMILIES)
def test_every_preset_gives_the_outputs_its_spec_says(family):
    spec = spec_of(family)
    with torch.device('meta'):  # no memory, no initialisation cost: the structure alone
        for preset in spec.presets:
            model = backbone_class(spec)(preset)
            got = [(o['num_chs'], o['reduction']) for o in model.output_info()]
            assert got == [(o.channels, o.stride) for o in spec.preset_outputs(preset)], preset


def test_the_packages_families_are_spelled_out_for_type_checkers():
    """The classes of the families in the package are written out where readers and type checkers look:
    the public re-export and OpenMMLab's registration (a family registered at run time gets both made)."""
    packaged = {spec.class_name for spec in registry.FAMILIES.values() if spec.model_in is None}
    package = Path(inline_dense.models.__file__).parents[1]
    imported = {alias.name for node in ast.parse((package / 'models' / '__init__.py').read_text()).body
                if isinstance(node, ast.ImportFrom) for alias in node.names}
    defined = {node.name for node in ast.parse((package / 'openmmlab' / 'backbones.py').read_text()).body
               if isinstance(node, ast.ClassDef)}
    assert packaged <= imported
    assert packaged <= defined


@pytest.mark.parametrize('taken', ['name', 'class_name', 'weights'])
def test_registering_a_taken_name_is_refused_and_changes_nothing(taken):
    spec = next(iter(registry.FAMILIES.values()))
    renamed = tuple(dataclasses.replace(w, name=f'inline_other_{w.size}') for w in spec.weights)
    fresh = dict(name='other', class_name='InLineOther', weights=renamed)
    clash = dataclasses.replace(spec, **dict(fresh, **{taken: getattr(spec, taken)}))
    before = dict(registry.FAMILIES)
    with pytest.raises(ValueError, match=r'^registry\.register: the .* of the family .* is taken'):
        registry.register(clash)
    assert before == registry.FAMILIES


# ---------------------------------------------------------------- build and shapes
@pytest.mark.parametrize('family', FAMILIES)
def test_any_size_gives_every_output_at_its_stride(family):
    model = tiny(family)
    with torch.no_grad():
        for hw in SIZES:
            outs = model(torch.randn(2, 3, *hw))
            assert [tuple(o.shape) for o in outs] == expected_shapes(model, 2, hw)
            assert all(torch.isfinite(o).all() for o in outs)


# ---------------------------------------------------------------- the authors' models
@pytest.mark.parametrize('family', FAMILIES)
def test_the_authors_fixture_is_matched(family):
    fixture = spec_of(family).fixture.name
    model, ref = build_reference_backbone(fixture, authors_checkpoint(fixture))
    with torch.no_grad():
        for case in ref['cases']:
            outs = model(case['input'])
            assert len(outs) == len(case['stages'])
            worst = max((o - r).abs().max().item() for o, r in zip(outs, case['stages']))
            assert worst < TOL, (fixture, worst)


@pytest.mark.parametrize('family', FAMILIES)
def test_the_authors_layout_converts_and_names_its_family(family):
    spec = spec_of(family)
    path = authors_checkpoint(spec.fixture.name)
    theirs = torch.load(path, weights_only=True)['model']
    before = dict(theirs)
    converted, _dropped = backbone_class(spec).convert_pretrained(theirs)
    assert theirs == before  # a pure function of the state dict
    assert detect_backbone(theirs) == detect_backbone(converted) == spec.class_name
    model = backbone_class(spec)(**spec.fixture.backbone_kwargs(load_reference(spec.fixture.name)['arch']))
    missing, unexpected = model.load_state_dict(converted, strict=False)  # shapes must fit
    assert not missing
    assert all(k.startswith('out_norms.') for k in unexpected)  # the final norm, our output norm
    ours = model.state_dict()
    again, _ = backbone_class(spec).convert_pretrained(dict(ours))
    assert set(again) == set(ours)  # our own layout passes through


@pytest.mark.parametrize('family', FAMILIES)
def test_no_checkpoint_matches_another_familys_key_patterns(family):
    """The registry's order decides nothing: a family's keys (authors' or ours) match its patterns only."""
    spec = spec_of(family)
    for keys in (state_keys(authors_checkpoint(spec.fixture.name)), list(tiny(family).state_dict())):
        matching = [name for name, other in registry.FAMILIES.items()
                    if any(re.search(p, k) for p in other.key_patterns for k in keys)]
        assert matching == [family]


# ---------------------------------------------------------------- trace, script, compile
class LeafTracer(torch.fx.Tracer):
    """torch.fx's tracer with the attentions as leaves (``inline_dense.models.tracing``)."""

    def is_leaf_module(self, m: torch.nn.Module, module_qualified_name: str) -> bool:
        return isinstance(m, FX_LEAF_MODULES) or super().is_leaf_module(m, module_qualified_name)


@pytest.mark.parametrize('family', FAMILIES)
def test_symbolic_trace_keeps_every_size(family):
    model = tiny(family)
    traced = torch.fx.GraphModule(model, LeafTracer().trace(model))
    with torch.no_grad():
        for hw in SIZES:
            x = torch.randn(1, 3, *hw)
            assert same(traced(x), model(x))


@pytest.mark.core
@pytest.mark.parametrize('family', FAMILIES)
def test_torchscript_gives_the_eager_outputs(family):
    model = tiny(family)
    scripted = torch.jit.script(model)
    with torch.no_grad():
        for hw in SIZES:
            x = torch.randn(1, 3, *hw)
            assert same(scripted(x), list(model(x)))


@pytest.mark.core
@pytest.mark.parametrize('family', FAMILIES)
def test_torch_compile_captures_it_for_every_size(family):
    """Dynamo captures the family at symbolic sizes and gives the eager outputs (the graph as it
    captures it, without code generation: tests/layers/test_compile.py runs inductor too)."""
    torch._dynamo.reset()
    model = tiny(family, **spec_of(family).every_kind_once)
    compiled = torch.compile(model, backend='eager', dynamic=True)
    with torch.no_grad():
        for hw in SIZES:
            x = torch.randn(1, 3, *hw)
            assert same(compiled(x), model(x), tol=1e-4)


# ---------------------------------------------------------------- the ecosystems
@pytest.mark.parametrize('family', FAMILIES)
def test_timm_features_and_classifier(family):
    import timm

    import inline_dense.timm  # noqa: F401  (registers the published variants)
    spec, variant = spec_of(family), SMALLEST[family]
    features = timm.create_model(variant, features_only=True, **spec.tiny).eval()
    outputs = spec.preset_outputs(dict(spec.presets[spec.weights[0].preset], **spec.tiny))
    outputs = outputs[-3:] if spec.plain else outputs  # timm's default: a plain ViT's last 3 blocks
    assert features.feature_info.reduction() == [o.stride for o in outputs]
    assert features.feature_info.channels() == [o.channels for o in outputs]
    with torch.no_grad():
        maps = features(torch.randn(1, 3, *SIZES[0]))
        logits = timm.create_model(variant, num_classes=7, **spec.tiny).eval()(torch.randn(2, 3, *SIZES[1]))
    assert [m.shape[1] for m in maps] == features.feature_info.channels()
    assert logits.shape == (2, 7)
    assert torch.isfinite(logits).all()


@pytest.mark.skipif(sys.version_info < (3, 10), reason='segmentation_models_pytorch 0.6 needs Python >= 3.10')
@pytest.mark.parametrize('family', FAMILIES)
def test_smp_takes_it_as_an_encoder(family):
    from inline_dense.smp import encoder_name, smp
    spec, variant = spec_of(family), SMALLEST[family]
    if one_stride(spec):
        with pytest.raises(ValueError, match=r'(?i)multi-stride encoder'):
            smp.Unet(encoder_name(variant), encoder_weights=None, classes=3)
        return
    model = smp.Unet(encoder_name(variant), encoder_weights=None, classes=3, **spec.tiny).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 96)).shape == (1, 3, 64, 96)


@pytest.mark.parametrize('family', FAMILIES)
def test_torchvision_fpn_backbone(family):
    from inline_dense.torchvision_detection import inline_fpn_backbone
    spec, variant = spec_of(family), SMALLEST[family]
    # a plain ViT's one stride-16 map goes through ViTDet's simple pyramid (strides 4-32)
    backbone = inline_fpn_backbone(variant, out_channels=16, **spec.tiny).eval()
    with torch.no_grad():
        levels = backbone(torch.randn(1, 3, *SIZES[0]))
    strides = backbone.level_strides
    assert len(levels) == len(strides)
    assert all(v.shape[1] == 16 for v in levels.values())
    # a pyramid's level s covers ceil(H / s) cells; the simple pyramid's levels are made from the plain
    # backbone's stride-b grid, ceil(H / b) cells, so they cover ceil(ceil(H / b) * b / s)
    base = spec.preset_outputs(spec.weights[0].preset)[0].stride if one_stride(spec) else 1
    assert [tuple(v.shape[-2:]) for v in levels.values()] == [
        tuple(math.ceil(math.ceil(side / base) * base / s) for side in SIZES[0]) for s in strides]


@pytest.mark.parametrize('family', FAMILIES)
def test_transformers_timm_backbone(family):
    transformers = pytest.importorskip('transformers', reason='transformers 5 is not installed')
    if int(transformers.__version__.split('.')[0]) < 5:
        pytest.skip(f'transformers {transformers.__version__}: written for transformers 5')
    import inline_dense.timm  # noqa: F401  (registers the published variants)
    spec, variant = spec_of(family), SMALLEST[family]
    outputs = spec.preset_outputs(spec.weights[0].preset)
    config = transformers.TimmBackboneConfig(backbone=variant, out_indices=list(range(len(outputs))),
                                             use_pretrained_backbone=False)
    backbone = transformers.TimmBackbone(config).eval()
    assert backbone.channels == [o.channels for o in outputs]
    with torch.no_grad():
        maps = backbone(torch.randn(1, 3, 64, 64)).feature_maps
    assert [m.shape[-1] for m in maps] == [math.ceil(64 / o.stride) for o in outputs]


@pytest.mark.parametrize('family', FAMILIES)
def test_openmmlab_registers_and_builds_it(family):
    pytest.importorskip('mmseg')
    from mmdet.registry import MODELS as DET
    from mmseg.registry import MODELS as SEG

    import inline_dense.openmmlab as adapter
    spec = spec_of(family)
    registered = getattr(adapter, spec.class_name)
    assert issubclass(registered, backbone_class(spec))
    for models in (DET, SEG):
        assert models.get(spec.class_name) is registered
    model = DET.build(dict(type=spec.class_name, drop_path_rate=0.0, init_cfg=None, **spec.tiny))
    model.init_weights()
    with torch.no_grad():
        outs = model.eval()(torch.randn(1, 3, *SIZES[0]))
    assert [tuple(o.shape) for o in outs] == expected_shapes(model, 1, SIZES[0])
