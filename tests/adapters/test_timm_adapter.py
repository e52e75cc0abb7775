"""The InLine models in timm (``import inline_dense.timm``): registration, the authors' logits,
weights through our checkpoint reading, and timm's own model contract (as timm's test_models.py
checks it: forward_features vs forward_intermediates, forward_head, reset_classifier, grad
checkpointing, feature_info, meta-device construction), for all ten variants."""
import math
import os
import shutil

import pytest
import timm
import torch
from reference_models import FIXTURES, authors_checkpoint, load_reference

import inline_dense.timm  # registers the models
from helpers import SHALLOW, SMALLEST, STRIDES, TINY_KINDS
from inline_dense import registry, variants
from inline_dense.checkpoint import PUBLISHED
from inline_dense.models.classifier import VARIANTS

SMALL_PRESETS = tuple(SMALLEST.values())


def small(variant, **kwargs):
    """The t preset's attention kinds with one block per stage and narrow stages: the contract, quickly."""
    return timm.create_model(variant, drop_path_rate=0.0, **SHALLOW[variant], **kwargs)

SIZE = (72, 88)  # not multiples of 32


def fixture_model(kind, **kwargs):
    """timm model of the family's fixture's arch (its smallest variant), the authors' file loaded through timm."""
    fixture = registry.family(kind).fixture
    ref = load_reference(fixture.name)
    arch = {ours: ref['arch'][theirs] for theirs, ours in fixture.arguments.items()}
    kwargs.setdefault('pretrained_cfg_overlay', dict(file=authors_checkpoint(fixture.name)))
    kwargs.setdefault('pretrained', True)
    return timm.create_model(SMALLEST[kind], drop_path_rate=0.0, **arch, **kwargs).eval(), ref


def test_list_models_gives_the_ten_variants_under_the_inline_names():
    assert timm.list_models('inline_*') == sorted(PUBLISHED)
    assert timm.list_pretrained('inline_*') == sorted(f'{v}.in1k' for v in PUBLISHED)


@pytest.mark.parametrize('variant', sorted(VARIANTS))
def test_meta_construction_and_pretrained_cfg(variant):
    """Every preset builds on the meta device (as smp's tu- probe does) with the authors' cfg."""
    with torch.device('meta'):
        model = timm.create_model(variant)
        features = timm.create_model(variant, features_only=True)
    cfg = model.pretrained_cfg
    size = variants.variant(variant).weights.input_size  # each InLine-DeiT its own (224 / 288 / 448)
    outputs = variants.spec_of(variant).preset_outputs(variants.variant(variant).arch)
    assert cfg['url'] == PUBLISHED[variant].url
    assert cfg['custom_load'] is True
    assert cfg['mean'] == timm.data.IMAGENET_DEFAULT_MEAN
    assert cfg['std'] == timm.data.IMAGENET_DEFAULT_STD
    assert cfg['input_size'] == (3, size, size)
    assert cfg['interpolation'] == 'bicubic'
    assert cfg['crop_pct'] == 0.875
    assert cfg['crop_mode'] == 'squash'  # Swin's codebase: resize 256x256, crop 224
    assert model.default_cfg is model.pretrained_cfg
    state = model.state_dict()
    assert cfg['first_conv'] + '.weight' in state
    assert cfg['classifier'] + '.weight' in state
    assert state['head.weight'].shape == (1000, model.num_features)
    assert model.num_features == model.backbone.embed_dims[-1]
    assert [f['reduction'] for f in model.feature_info] == [o.stride for o in outputs]
    picked = outputs[-3:] if variants.spec_of(variant).plain else outputs  # timm's ViTs: the last 3 blocks
    assert features.feature_info.reduction() == [o.stride for o in picked]
    assert features.feature_info.channels() == [o.channels for o in picked]
    assert [o.channels for o in outputs] == list(model.backbone.embed_dims)
    assert not any(k.startswith(('head.', 'norm.')) for k in features.state_dict())


@pytest.mark.parametrize('kind', TINY_KINDS)
def test_logits_match_the_authors_model(kind):
    """An authors'-layout file loaded through timm (custom_load) gives the authors' logits."""
    model, ref = fixture_model(kind, num_classes=10)
    with torch.no_grad():
        for case in ref['cases']:
            assert (model(case['input']) - case['logits']).abs().max() < 1e-4


def test_random_weights_do_not_match_the_authors_logits():
    model, ref = fixture_model('swin', num_classes=10, pretrained=False)
    with torch.no_grad():
        assert (model(ref['cases'][0]['input']) - ref['cases'][0]['logits']).abs().max() > 1e-2


def test_pretrained_true_reads_inline_checkpoints_dir(tmp_path, monkeypatch):
    """pretrained=True resolves inline://<name> (checkpoints/<name>.pth first): no download here."""
    (tmp_path / 'checkpoints').mkdir()
    shutil.copy(os.path.join(FIXTURES, 'inline_pvt_mini_authors_layout.pth'),
                tmp_path / 'checkpoints' / 'inline_pvt_t.pth')
    monkeypatch.chdir(tmp_path)
    model, ref = fixture_model('pvt', num_classes=10, pretrained_cfg_overlay=None)
    assert model.pretrained_cfg['file'] == str(tmp_path / 'checkpoints' / 'inline_pvt_t.pth')
    with torch.no_grad():
        assert (model(ref['cases'][0]['input']) - ref['cases'][0]['logits']).abs().max() < 1e-4


def test_other_num_classes_keeps_the_backbone_and_makes_a_new_head():
    tuned, ref = fixture_model('cswin', num_classes=3)
    authors, _ = fixture_model('cswin', num_classes=10)
    x = ref['cases'][0]['input']
    with torch.no_grad():
        assert torch.equal(tuned.forward_features(x), authors.forward_features(x))
        assert tuned(x).shape == (1, 3)


def test_features_only_loads_pretrained_without_norm_and_head():
    model, ref = fixture_model('swin', features_only=True)
    authors, _ = fixture_model('swin', num_classes=10)
    x = ref['cases'][0]['input']
    with torch.no_grad():
        maps = model(x)
        _, expected = authors.forward_intermediates(x)
    assert all(torch.equal(a, b) for a, b in zip(maps, expected))
    assert not any(k.startswith(('model.head', 'model.norm')) for k in model.state_dict())


@pytest.mark.parametrize('variant', SMALL_PRESETS)
def test_forward_features_and_intermediates_agree(variant):
    """timm's forward_intermediates contract, at a size that is not a multiple of 32."""
    model = small(variant, num_classes=5).eval()
    x = torch.randn(2, 3, *SIZE)
    with torch.no_grad():
        final, intermediates = model.forward_intermediates(x)
        features = model.forward_features(x)
        logits = model(x)
        only = model.forward_intermediates(x, indices=[-1, 1], intermediates_only=True)
    assert torch.allclose(final, features)
    assert torch.allclose(model.forward_head(features), logits)
    assert logits.shape == (2, 5)
    assert len(intermediates) == len(model.feature_info) == 4
    for info, out in zip(model.feature_info, intermediates):
        assert out.shape == (2, info['num_chs'], math.ceil(SIZE[0] / info['reduction']),
                             math.ceil(SIZE[1] / info['reduction']))
    assert [o.shape for o in only] == [intermediates[1].shape, intermediates[3].shape]
    assert torch.equal(only[0], intermediates[1])


@pytest.mark.parametrize('variant', SMALL_PRESETS)
def test_reset_classifier_and_pre_logits(variant):
    model = small(variant).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        pooled = model.forward_head(model.forward_features(x), pre_logits=True)
        model.reset_classifier(0)
        assert torch.equal(model(x), pooled)
        assert pooled.shape == (1, model.num_features)
        model.reset_classifier(4)
        assert model(x).shape == (1, 4)
        assert model.get_classifier().out_features == 4
    with pytest.raises(ValueError, match="global_pool='catavgmax'"):
        model.reset_classifier(4, 'catavgmax')


@pytest.mark.parametrize('variant', SMALL_PRESETS)
def test_grad_checkpointing_leaves_outputs_and_gradients_unchanged(variant):
    model = small(variant, num_classes=3).train()
    x = torch.randn(2, 3, 64, 64)
    results = []
    for enable in (False, True):
        model.set_grad_checkpointing(enable)
        model.zero_grad()
        out = model(x)
        out.square().sum().backward()
        results.append((out.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    assert torch.allclose(results[0][0], results[1][0], atol=1e-6)
    assert all(torch.allclose(g, results[1][1][n], atol=1e-5) for n, g in results[0][1].items())


@pytest.mark.parametrize('variant', SMALL_PRESETS)
def test_features_only_strides_and_pruning(variant):
    model = small(variant, features_only=True, out_indices=(0, 2)).eval()
    strides = [STRIDES[variant][0], STRIDES[variant][2]]
    assert model.feature_info.reduction() == strides
    assert len(model.model.backbone.stages) == 3  # the last stage is pruned away
    with torch.no_grad():
        maps = model(torch.randn(1, 3, *SIZE))
    assert [tuple(m.shape[-2:]) for m in maps] == [(math.ceil(SIZE[0] / s), math.ceil(SIZE[1] / s)) for s in strides]
    assert [m.shape[1] for m in maps] == model.feature_info.channels()
    out = sum(m.sum() for m in model.train()(torch.randn(2, 3, 64, 64)))
    out.backward()
    unused = [n for n, p in model.named_parameters() if p.grad is None]
    assert not unused  # nothing left that the output does not use (DDP without find_unused_parameters)


def test_full_presets_run_at_any_size():
    for variant in SMALL_PRESETS:
        model = timm.create_model(variant, features_only=True).eval()
        with torch.no_grad():
            maps = model(torch.randn(1, 3, 36, 50))
        strides = model.feature_info.reduction()
        outputs = variants.spec_of(variant).preset_outputs(variants.variant(variant).arch)
        assert strides == [o.stride for o in (outputs[-3:] if variants.spec_of(variant).plain else outputs)]
        assert [tuple(m.shape[-2:]) for m in maps] == [(math.ceil(36 / s), math.ceil(50 / s)) for s in strides]
        assert [m.shape[1] for m in maps] == model.feature_info.channels()


def test_size_arguments_are_taken_and_output_stride_is_refused():
    """img_size goes into the pretrained cfg (the data config follows it); any input size still runs."""
    model = small('inline_pvt_t', img_size=512, dynamic_img_size=True, strict_img_size=False, num_classes=2)
    assert model.pretrained_cfg['input_size'] == (3, 512, 512)
    with torch.no_grad():
        assert model.eval()(torch.randn(1, 3, 64, 96)).shape == (1, 2)
    for stride in (8, 16):
        with pytest.raises(ValueError, match=f'output_stride={stride} is not supported'):
            timm.create_model('inline_swin_t', output_stride=stride, features_only=True)
    small('inline_swin_t', output_stride=32, num_classes=2)


def test_mismatched_checkpoint_is_refused_with_the_keys():
    with pytest.raises(Exception, match='does not fit'):
        timm.create_model('inline_swin_t', pretrained=True, num_classes=10, pretrained_cfg_overlay=dict(
            file=os.path.join(FIXTURES, 'inline_swin_mini_authors_layout.pth')))


def test_pretrained_without_a_file_says_how_to_pass_one(monkeypatch):
    def offline(name, advice=None):
        raise FileNotFoundError(f'{name} is not available offline')
    monkeypatch.setattr(inline_dense.timm, 'resolve', offline)
    with pytest.raises(FileNotFoundError, match=r"not available offline\n.*pretrained_cfg_overlay=dict\(file="):
        timm.create_model('inline_pvt_t', pretrained=True)
