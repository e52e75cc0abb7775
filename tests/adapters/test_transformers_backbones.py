"""The InLine timm models as backbones of transformers' UperNet, Mask2Former and DETR through
``TimmBackboneConfig(backbone='inline_*', ...)``: forward and backward with small heads and random
weights, the network blocked, and the recipe for loading the backbone's weights afterwards.
Skipped when transformers (5.x) is not installed."""
import socket

import pytest
import torch

transformers = pytest.importorskip('transformers', reason='transformers is not installed (pip install '
                                                          '"transformers==5.*"): the test extra for these models')
if int(transformers.__version__.split('.')[0]) < 5:
    pytest.skip(f'transformers {transformers.__version__}: these tests are written for transformers 5',
                allow_module_level=True)

import timm  # noqa: E402
from timm.models._features import FeatureGetterNet  # noqa: E402
from transformers import (  # noqa: E402
    DetrConfig,
    DetrForObjectDetection,
    Mask2FormerConfig,
    Mask2FormerForUniversalSegmentation,
    TimmBackboneConfig,
    UperNetConfig,
    UperNetForSemanticSegmentation,
)

import inline_dense.timm  # noqa: E402,F401  (registers the published variants with timm)
from helpers import PYRAMIDS, SMALLEST  # noqa: E402
from inline_dense import variants  # noqa: E402

VARIANTS = list(SMALLEST.values())
CHANNELS = {v: [o.channels for o in variants.spec_of(v).preset_outputs(variants.variant(v).arch)] for v in VARIANTS}
SIZE = 64


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any connection attempt fails: building these models must not ask the Hub."""
    def refuse(*_args, **_kwargs):
        raise OSError('network blocked by the test')
    monkeypatch.setattr(socket.socket, 'connect', refuse)
    monkeypatch.setattr(socket, 'create_connection', refuse)


def backbone_config(variant, out_indices=(0, 1, 2, 3)):
    return TimmBackboneConfig(backbone=variant, out_indices=list(out_indices), use_pretrained_backbone=False)


def pixels(batch=2):
    return torch.randn(batch, 3, SIZE, SIZE, generator=torch.Generator().manual_seed(0))


def assert_backbone_trained(model):
    missing = [n for n, p in model.named_parameters() if p.requires_grad and p.grad is None]
    assert not missing, missing[:5]
    backbones = [m for m in model.modules() if isinstance(m, FeatureGetterNet)]  # DETR unwraps TimmBackbone
    assert len(backbones) == 1
    grads = [p.grad for p in backbones[0].parameters()]
    assert grads
    assert all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


@pytest.mark.parametrize('variant', VARIANTS)
def test_upernet(variant):
    torch.manual_seed(0)
    model = UperNetForSemanticSegmentation(UperNetConfig(backbone_config=backbone_config(variant), hidden_size=32,
                                                         auxiliary_channels=16, num_labels=5))
    assert model.backbone.channels == CHANNELS[variant][:4]  # out_indices (0, 1, 2, 3)
    labels = torch.randint(0, 5, (2, SIZE, SIZE), generator=torch.Generator().manual_seed(1))
    out = model(pixel_values=pixels(), labels=labels)
    assert out.logits.shape == (2, 5, SIZE, SIZE)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert_backbone_trained(model)


@pytest.mark.parametrize('variant', PYRAMIDS)  # its pixel decoder takes strides 8-32 and a stride-4 mask map
def test_mask2former(variant):
    torch.manual_seed(0)
    config = Mask2FormerConfig(backbone_config=backbone_config(variant), feature_size=32, mask_feature_size=32,
                               hidden_dim=32, encoder_feedforward_dim=64, encoder_layers=1, decoder_layers=2,
                               num_attention_heads=2, dim_feedforward=64, num_queries=5, num_labels=3,
                               train_num_points=64)
    model = Mask2FormerForUniversalSegmentation(config)
    masks = [torch.zeros(1, SIZE, SIZE), torch.zeros(1, SIZE, SIZE)]
    masks[0][0, 10:30, 10:30] = 1
    masks[1][0, 5:50, 20:40] = 1
    out = model(pixel_values=pixels(), mask_labels=masks, class_labels=[torch.tensor([1]), torch.tensor([2])])
    assert out.masks_queries_logits.shape == (2, 5, SIZE // 4, SIZE // 4)
    assert out.class_queries_logits.shape == (2, 5, 4)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert_backbone_trained(model)


@pytest.mark.parametrize('variant', VARIANTS)
def test_detr(variant):
    torch.manual_seed(0)
    config = DetrConfig(backbone_config=backbone_config(variant, (1, 2, 3)), d_model=32, encoder_layers=1,
                        decoder_layers=1, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=2,
                        decoder_attention_heads=2, num_queries=5, num_labels=3)
    model = DetrForObjectDetection(config)
    labels = [dict(class_labels=torch.tensor([1]), boxes=torch.tensor([[0.5, 0.5, 0.2, 0.3]])) for _ in range(2)]
    out = model(pixel_values=pixels(), labels=labels)
    assert out.logits.shape == (2, 5, 4)
    assert out.pred_boxes.shape == (2, 5, 4)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert_backbone_trained(model)


def test_backbone_weights_load_from_a_timm_model_afterwards():
    """transformers 5 builds the backbone with random weights; a timm ``features_only`` model with
    the same ``out_indices`` (pretrained=True in real use) has the same state-dict keys."""
    torch.manual_seed(0)
    model = UperNetForSemanticSegmentation(UperNetConfig(backbone_config=backbone_config('inline_pvt_t'),
                                                         hidden_size=32, auxiliary_channels=16, num_labels=5))
    torch.manual_seed(1)
    source = timm.create_model('inline_pvt_t', features_only=True, out_indices=(0, 1, 2, 3))
    x = pixels(1)
    model.eval()
    with torch.no_grad():
        theirs = source.eval()(x)
        before = model.backbone(pixel_values=x).feature_maps
        inner = next(m for m in model.modules() if isinstance(m, FeatureGetterNet))  # the timm model inside
        inner.load_state_dict(source.state_dict())
        ours = model.backbone(pixel_values=x).feature_maps
    assert not torch.allclose(before[0], theirs[0], atol=1e-3)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(ours, theirs))


def test_a_backbone_name_alone_asks_the_hub_first():
    """What docs/ecosystems.md says: ``UperNetConfig(backbone='inline_swin_t')`` (no
    ``backbone_config``) asks the Hub whether a repository of that name exists, so offline it fails;
    a ``TimmBackboneConfig`` does not."""
    with pytest.raises(Exception, match=r'blocked|offline|connect|Connect'):
        UperNetConfig(backbone='inline_swin_t')
    assert UperNetConfig(backbone_config=backbone_config('inline_swin_t')).backbone_config.backbone == 'inline_swin_t'


@pytest.mark.parametrize(('variant', 'out_indices'), [('inline_swin_t', (0, 1, 2, 3)), ('inline_swin_t', (1, 2, 3)),
                                                     ('inline_deit_t', (3, 5, 7, 11))])
def test_hidden_states_are_every_stages_maps(variant, out_indices):
    """As docs/ecosystems.md says: output_hidden_states=True gives every stage's (block's) map, the
    feature maps those of out_indices. transformers' TimmBackbone sets return_layers to every layer and
    indexes the result by out_indices; the getter ignored it (IndexError unless out_indices were 0-3)."""
    from transformers import TimmBackbone
    x = pixels(1)
    backbone = TimmBackbone(backbone_config(variant, out_indices)).eval()
    with torch.no_grad():
        out = backbone(x, output_hidden_states=True)
        plain = backbone(x)
    assert [h.shape[1] for h in out.hidden_states] == CHANNELS[variant][:max(out_indices) + 1]
    for i, fmap, again in zip(out_indices, out.feature_maps, plain.feature_maps):
        assert torch.equal(fmap, out.hidden_states[i])
        assert torch.equal(fmap, again)  # return_layers restored: the next call gives out_indices again
    assert len(plain.feature_maps) == len(out_indices)


def test_upernet_on_deit_with_hidden_states():
    torch.manual_seed(0)
    model = UperNetForSemanticSegmentation(UperNetConfig(backbone_config=backbone_config(
        'inline_deit_t', (3, 5, 7, 11)), hidden_size=32, auxiliary_channels=16, num_labels=5))
    out = model(pixel_values=pixels(), output_hidden_states=True)
    assert out.logits.shape == (2, 5, SIZE, SIZE)
    assert len(out.hidden_states) == 12
