"""InLine encoders in segmentation_models_pytorch 0.6 (``tu-inline_*``): every decoder that takes
stride-32 features, for the three families; DeepLabV3/V3+ refused; save / load round trip; the
Python 3.9 message."""
import importlib
import sys

import pytest
import torch

smp = pytest.importorskip('segmentation_models_pytorch')
from reference_models import authors_checkpoint  # noqa: E402

import inline_dense.smp  # noqa: E402  (registers the encoders)
from helpers import PYRAMIDS, SHALLOW  # noqa: E402

# narrow, one block per stage: each decoder's wiring checked quickly; the pyramids (smp refuses a plain ViT)
ENCODERS = {v: SHALLOW[v] for v in PYRAMIDS}
DECODERS = ('Unet', 'UPerNet', 'FPN', 'Segformer', 'Linknet', 'MAnet', 'UnetPlusPlus')


def build(decoder, variant, classes=3, **kwargs):
    return getattr(smp, decoder)(f'tu-{variant}', encoder_weights=None, classes=classes,
                                 drop_path_rate=0.0, **ENCODERS[variant], **kwargs)


@pytest.mark.parametrize('variant', sorted(ENCODERS))
@pytest.mark.parametrize('decoder', DECODERS)
def test_decoder_forward_backward(decoder, variant):
    torch.manual_seed(0)
    model = build(decoder, variant).train()
    size = (40, 56) if decoder == 'Unet' else (32, 64)  # smp asks the others for multiples of 32
    out = model(torch.randn(2, 3, *size))
    assert out.shape == (2, 3, *size)
    assert torch.isfinite(out).all()
    out.square().mean().backward()
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for _, p in params), \
        [n for n, p in params if p.grad is None or not torch.isfinite(p.grad).all()]
    assert model.encoder.model.feature_info.reduction() == [4, 8, 16, 32]


def test_the_documented_call_with_a_full_preset():
    model = smp.Unet('tu-inline_swin_t', encoder_weights=None, classes=4).eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 40, 56)).shape == (1, 4, 40, 56)


@pytest.mark.parametrize('decoder', ['DeepLabV3', 'DeepLabV3Plus'])
def test_decoders_needing_output_stride_8_or_16_are_refused(decoder):
    with pytest.raises(ValueError, match=r'output_stride=\d+ is not supported.*DeepLabV3'):
        getattr(smp, decoder)('tu-inline_pvt_t', encoder_weights=None, classes=2)


def test_save_pretrained_and_from_pretrained_round_trip(tmp_path):
    model = build('UPerNet', 'inline_cswin_t', classes=2).eval()
    model.save_pretrained(str(tmp_path))
    loaded = smp.from_pretrained(str(tmp_path)).eval()
    assert type(loaded) is type(model)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(model(x), loaded(x))


def test_encoder_weights_true_loads_an_authors_file():
    """encoder_weights=True goes through inline_dense.timm's reading (here a local file)."""
    path = authors_checkpoint('inline_swin_mini')
    model = smp.FPN('tu-inline_swin_t', encoder_weights=True, classes=2, pretrained_cfg_overlay=dict(file=path),
                    embed_dims=16, depths=(2, 2, 4, 2), num_heads=(1, 2, 4, 8), attn_type='IIMS2')
    authors = torch.load(path, weights_only=True)['model']
    backbone = model.encoder.model.model.backbone
    assert torch.equal(backbone.patch_embed.proj.weight, authors['patch_embed.proj.weight'])
    assert torch.equal(backbone.stages[3].blocks[1].mlp.fc2.weight, authors['layers.3.blocks.1.mlp.fc2.weight'])


def test_encoder_name_checks_the_variant():
    assert inline_dense.smp.encoder_name('inline_pvt_m') == 'tu-inline_pvt_m'
    with pytest.raises(ValueError, match='inline_swin_t'):
        inline_dense.smp.encoder_name('inline_swin')


def test_python_39_gets_a_clear_import_error(monkeypatch):
    monkeypatch.setattr(sys, 'version_info', (3, 9, 18, 'final', 0))
    monkeypatch.delitem(sys.modules, 'inline_dense.smp')
    with pytest.raises(ImportError, match=r'needs Python >= 3\.10; this is Python 3\.9.*inline_dense\.timm'):
        importlib.import_module('inline_dense.smp')
