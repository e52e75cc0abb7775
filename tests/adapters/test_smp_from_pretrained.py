"""smp's ``save_pretrained`` / ``from_pretrained`` round-trip a model on an InLine encoder built
with pretrained weights after the pretrained file is gone: every tensor comes from the saved file."""
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip('segmentation_models_pytorch')

import torch
from reference_models import authors_checkpoint

import inline_dense.smp  # noqa: F401
from inline_dense.smp import smp

SWIN = Path(authors_checkpoint('inline_swin_mini'))
MINI = dict(embed_dims=16, depths=(2, 2, 4, 2), num_heads=(1, 2, 4, 8), attn_type='IIMS2')


def test_round_trip_without_the_pretrained_file(tmp_path):
    weights = tmp_path / 'inline_swin_mini.pth'
    shutil.copy(SWIN, weights)
    torch.manual_seed(0)
    model = smp.UPerNet('tu-inline_swin_t', encoder_weights=True, pretrained_cfg_overlay=dict(file=str(weights)),
                        decoder_channels=32, classes=3, **MINI).eval()
    authors = torch.load(SWIN, weights_only=True)['model']['patch_embed.proj.weight']
    assert any(torch.equal(v, authors) for v in model.encoder.state_dict().values())  # the file was loaded
    with torch.no_grad():
        for p in model.decoder.parameters():  # trained-looking decoder weights, not the initialisation's
            p.normal_(0, 0.1)
    model.save_pretrained(str(tmp_path / 'saved'))
    weights.unlink()
    loaded = smp.from_pretrained(str(tmp_path / 'saved')).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert torch.equal(model(x), loaded(x))
    assert loaded.config['encoder_weights'] is True  # the config still says how the model was first built
    loaded.save_pretrained(str(tmp_path / 'again'))
    assert json.loads((tmp_path / 'again' / 'config.json').read_text())['encoder_weights'] is True
    same_class = smp.UPerNet.from_pretrained(str(tmp_path / 'saved')).eval()
    with torch.no_grad():
        assert torch.equal(model(x), same_class(x))
