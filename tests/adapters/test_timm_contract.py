"""timm's model contract, as timm's own tests/test_models.py and its users take it for granted, for
the ten InLine models: pooling choices and an unpooled ``forward``, hook features equal to the
getter's, NHWC feature maps, ``no_weight_decay`` / ``group_matcher`` (timm's optimizer factory),
meta-device construction, TorchScript and FX.

Family-level properties run on narrow one-block models of the t presets (seconds); the
per-variant checks that need the real arch (cfgs, parameter names) build on the meta device.
``tools/ecosystem_tests.py`` runs timm's test file itself.
"""
import math

import pytest
import segmentation_models_pytorch as smp
import timm
import timm.optim
import torch
from timm.models import FeatureHookNet
from timm.models._manipulate import reinit_non_persistent_buffers
from torchvision.models.feature_extraction import create_feature_extractor

import inline_dense.smp  # noqa: F401  (registers the models with timm and smp)
from helpers import PYRAMIDS, SHALLOW, SMALLEST, TOKEN_HEADS
from inline_dense import variants
from inline_dense.models.classifier import VARIANTS
from inline_dense.models.tracing import FX_LEAF_MODULES

SMALL = tuple(SMALLEST.values())
X = (1, 3, 72, 88)  # not multiples of 32: every stage pads


def small(variant, seed=0, **kwargs):
    """A one-block-per-stage, narrow model of the variant's family (its attention kinds), seeded."""
    torch.manual_seed(seed)
    return timm.create_model(variant, drop_path_rate=0.0, **SHALLOW[variant], **kwargs).eval()


@pytest.fixture(scope='module')
def x():
    return torch.randn(X, generator=torch.Generator().manual_seed(1))


# ----------------------------------------------------------------------------- pooling and head
@pytest.mark.parametrize('variant', [v for v in SMALL if v not in TOKEN_HEADS])
def test_global_pool_choices_and_unpooled_forward(variant, x):
    model = small(variant)
    with torch.no_grad():
        feats = model.forward_features(x)  # (B, C, 3, 3)
        assert feats.shape == (1, model.num_features, 3, 3)
        expected = {'avg': feats.mean((2, 3)), 'max': feats.amax((2, 3)),
                    'avgmax': 0.5 * (feats.mean((2, 3)) + feats.amax((2, 3)))}
        for pool, pooled in expected.items():
            model.reset_classifier(0, pool)
            torch.testing.assert_close(model(x), pooled, rtol=0, atol=0)
        model.reset_classifier(0, '')  # timm's way to the unpooled map
        assert torch.equal(model(x), feats)
        built = small(variant, num_classes=0, global_pool='')
        assert torch.equal(built(x), feats)
        model.reset_classifier(5, '')  # with a head: per-position logits
        assert model(x).shape == (1, 5, 3, 3)
    with pytest.raises(ValueError, match="global_pool='token'"):
        small(variant, global_pool='token')


@pytest.mark.parametrize('variant', TOKEN_HEADS)
def test_a_vits_pools_over_its_tokens(variant, x):
    """timm's VisionTransformer: forward_features gives the normed tokens, cls first; 'token' (the
    default) pools the cls token, 'avg' / 'max' / 'avgmax' the others, '' keeps them all."""
    model = small(variant)
    grid = math.ceil(X[2] / 16) * math.ceil(X[3] / 16)
    with torch.no_grad():
        tokens = model.forward_features(x)
        assert tokens.shape == (1, 1 + grid, model.num_features)
        assert model.global_pool == 'token'
        patches = tokens[:, 1:]
        expected = {'token': tokens[:, 0], 'avg': patches.mean(1), 'max': patches.amax(1),
                    'avgmax': 0.5 * (patches.mean(1) + patches.amax(1)), '': tokens}
        for pool, pooled in expected.items():
            model.reset_classifier(0, pool)
            torch.testing.assert_close(model(x), pooled, rtol=0, atol=0)
        model.reset_classifier(5, '')  # with a head: per-token logits
        assert model(x).shape == (1, 1 + grid, 5)
        final, maps = small(variant).forward_intermediates(x, norm=True)
        torch.testing.assert_close(final, tokens, rtol=0, atol=0)
        # norm=True: every block's grid through the final norm, as timm's ViT
        torch.testing.assert_close(maps[-1].flatten(2).transpose(1, 2), tokens[:, 1:], rtol=0, atol=0)
    with pytest.raises(ValueError, match="global_pool='map'"):
        small(variant, global_pool='map')
    # timm's ViT size arguments are taken; the grid follows any input (dynamic_img_size's behaviour)
    sized = small(variant, img_size=64, dynamic_img_size=True, num_classes=0)
    with torch.no_grad():
        assert sized.forward_features(x).shape == tokens.shape


# ----------------------------------------------------------------------------- features
@pytest.mark.parametrize('variant', SMALL)
def test_hook_features_equal_the_getter(variant, x):
    every = dict(out_indices=(0, 1, 2, 3))  # a plain ViT's default is its last 3 blocks
    getter = small(variant, features_only=True, **every)
    hook = small(variant, features_only=True, feature_cls='hook', **every)
    wrapped = FeatureHookNet(small(variant), out_indices=(0, 1, 2, 3))
    with torch.no_grad():
        expected = getter(x)
        for got in (hook(x), wrapped(x)):
            assert len(got) == 4
            for a, b in zip(expected, got):
                assert torch.equal(a, b)
    assert hook.feature_info.module_name() == [f'backbone.taps.{i}' for i in range(4)]


@pytest.mark.parametrize('variant', SMALL)
def test_features_only_nhwc(variant, x):
    nchw = small(variant, features_only=True)
    nhwc = small(variant, features_only=True, output_fmt='NHWC')
    with torch.no_grad():
        for a, b in zip(nchw(x), nhwc(x)):
            assert torch.equal(a.permute(0, 2, 3, 1), b)
    with pytest.raises(ValueError, match="feature_cls='getter'"):
        small(variant, features_only=True, feature_cls='hook', output_fmt='NHWC')
    with pytest.raises(TypeError, match='features_only=True'):
        small(variant, output_fmt='NHWC')


# ----------------------------------------------------------------------------- optimizer
@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_no_weight_decay_and_group_matcher(variant):
    with torch.device('meta'):
        model = timm.create_model(variant)
    names = dict(model.named_parameters())
    nwd = model.no_weight_decay()
    assert nwd <= set(names)
    if variant.startswith('inline_swin'):  # the softmax blocks' relative-position tables
        assert nwd
        assert all(n.endswith('relative_position_bias_table') for n in nwd)
    elif variant.startswith('inline_pvt'):  # a position embedding per stage
        assert sorted(nwd) == [f'backbone.stages.{i}.pos_embed' for i in range(4)]
    # the family's endings (CSwin: none beyond the 1-D parameters timm leaves undecayed anyway)
    endings = variants.spec_of(variant).head.no_weight_decay
    assert nwd == {n for n in names if endings and n.endswith(endings)}
    groups = timm.models.group_parameters(model, model.group_matcher(coarse=False))
    grouped = [n for g in groups.values() for n in g]
    assert sorted(grouped) == sorted(names)  # every parameter in exactly one group
    coarse = timm.models.group_parameters(model, model.group_matcher(coarse=True))
    # the stem (none in PVT: its patch embeddings belong to the stages), the stages (a ViT's blocks),
    # then norm and head
    assert len(coarse) == len(model.backbone.stages) + 2 - variant.startswith('inline_pvt')


@pytest.mark.parametrize('variant', SMALL)
def test_timm_optimizer_factory_keeps_tables_and_embeddings_undecayed(variant):
    model = small(variant)
    opt = timm.optim.create_optimizer_v2(model, 'adamw', lr=1e-3, weight_decay=0.05, layer_decay=0.75)
    undecayed = {id(p) for g in opt.param_groups if g['weight_decay'] == 0 for p in g['params']}
    for name, p in model.named_parameters():
        if name in model.no_weight_decay() or p.ndim <= 1:
            assert id(p) in undecayed, name
        else:
            assert id(p) not in undecayed, name


# ----------------------------------------------------------------------------- meta device
@pytest.mark.parametrize('variant', SMALL)
def test_meta_build_to_empty_then_load_or_reinit_equals_a_normal_build(variant, x):
    normal = small(variant)
    kwargs = dict(drop_path_rate=0.0, **SHALLOW[variant])
    with torch.device('meta'):
        loaded = timm.create_model(variant, **kwargs)
        reinit = timm.create_model(variant, **kwargs)
    loaded.to_empty(device='cpu').load_state_dict(normal.state_dict())
    reinit.to_empty(device='cpu')
    done = reinit_non_persistent_buffers(reinit)
    reinit.load_state_dict(normal.state_dict())
    with torch.no_grad():
        expected = normal(x)
        assert torch.equal(loaded.eval()(x), expected)
        assert torch.equal(reinit.eval()(x), expected)
    for name, buf in normal.named_buffers():
        assert torch.equal(dict(loaded.named_buffers())[name], buf), name
    assert bool(done) == (variant == 'inline_swin_t')  # Swin's relative_position_index


# ----------------------------------------------------------------------------- FX
def assert_same(traced: torch.Tensor, eager: torch.Tensor) -> None:
    """A traced or scripted graph against eager: the same values up to float rounding (eager CPU inference
    runs the linear layers through oneDNN with the bias and GELU inside the product; a graph runs the plain
    ops)."""
    torch.testing.assert_close(traced, eager, rtol=1e-5, atol=1e-6)


class LeafTracer(torch.fx.Tracer):
    """Plain torch.fx with the attentions as leaf modules (and the core's wrapped helpers)."""

    def is_leaf_module(self, module, name):
        return isinstance(module, FX_LEAF_MODULES) or super().is_leaf_module(module, name)


@pytest.mark.parametrize('variant', SMALL)
def test_fx_forward_backward_and_feature_extraction(variant, x):
    model = small(variant, num_classes=7)
    fx = create_feature_extractor(model, ['head'], tracer_kwargs=dict(leaf_modules=list(FX_LEAF_MODULES)))
    with torch.no_grad():
        assert_same(fx(x)['head'], model(x))
    fx.train()(torch.cat([x, x.flip(-1)]))['head'].mean().backward()
    assert all(p.grad is not None for p in fx.parameters())
    getter = small(variant, features_only=True)
    traced = small(variant, features_only=True, feature_cls='fx')
    with torch.no_grad():
        for a, b in zip(getter(x), traced(x)):
            assert_same(a, b)


@pytest.mark.parametrize('variant', SMALL)
def test_fx_traced_backbone_keeps_padding_masks_and_small_inputs(variant, x):
    backbone = small(variant).backbone
    graph = torch.fx.GraphModule(backbone, LeafTracer().trace(backbone))
    batch = torch.cat([x, torch.randn(X)])
    valid_hw = [(72, 88), (40, 50)]
    with torch.no_grad():
        for args in ((batch, valid_hw), (x[..., :20, :24],)):  # a padded batch; below the total stride
            for a, b in zip(graph(*args), backbone(*args)):
                assert_same(a, b)


# ----------------------------------------------------------------------------- TorchScript
@pytest.mark.parametrize('variant', SMALL)
def test_torchscript_model_features_and_smp_encoder(variant, x):
    attn = dict(attn_type='SSSI') if variant == 'inline_pvt_t' else {}  # PVT's reduced-key stages too
    model = small(variant, **attn)
    features = small(variant, features_only=True, **attn)
    with torch.no_grad():
        assert_same(torch.jit.script(model)(x), model(x))
        for a, b in zip(torch.jit.script(features)(x), features(x)):
            assert_same(a, b)
        backbone = model.backbone  # a padded batch through the scripted backbone
        batch, valid_hw = torch.cat([x, torch.randn(X)]), [(72, 88), (40, 50)]
        for a, b in zip(torch.jit.script(backbone)(batch, valid_hw), backbone(batch, valid_hw)):
            assert_same(a, b)
        if variant not in PYRAMIDS:  # smp refuses a single-stride encoder (tests/adapters/test_smp_encoders.py)
            return
        encoder = smp.encoders.get_encoder(f'tu-{variant}', encoder_weights=None, **SHALLOW[variant]).eval()
        assert encoder._is_torch_scriptable
        sample = torch.randn(1, 3, 64, 64)
        for a, b in zip(torch.jit.script(encoder)(sample), encoder(sample)):
            assert_same(a, b)
