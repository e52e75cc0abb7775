"""Every path that loads pretrained weights goes through the one strict loader (checkpoint.loading):
timm's ``pretrained`` (with ``in_chans``, another ``num_classes``, ``pretrained_cfg_overlay`` url /
file / hf_hub_id in timm's order), smp's ``in_channels``, ``build_classifier`` and deploy; each
refuses NaN / inf and integer-typed weights, and speaks its caller's terms."""
import logging
import os
import pathlib

import pytest
import timm
import torch
from reference_models import FIXTURES

import inline_dense.smp  # registers the models with timm and smp
import inline_dense.timm
from helpers import no_network_downloads
from inline_dense import variants
from inline_dense.checkpoint import CheckpointError, IntegerWeightsError, load_pretrained, resolve
from inline_dense.checkpoint.finite import NonFiniteWeightsError
from inline_dense.deploy.models import load_full_checkpoint
from inline_dense.models.classifier import InLineClassifier

PVT_FILE = os.path.join(FIXTURES, 'inline_pvt_mini_authors_layout.pth')


def pvt_arch():
    a = torch.load(os.path.join(FIXTURES, 'inline_pvt_mini_reference.pt'), weights_only=True)['arch']
    return dict(embed_dims=a['embed_dims'], depths=a['depths'], num_heads=a['num_heads'], mlp_ratios=a['mlp_ratios'],
                attn_type=a['attn_type'], sr_ratios=a['sr_ratios'], drop_path_rate=0.0)


def timm_pvt(file=PVT_FILE, **kwargs):
    kwargs.setdefault('pretrained_cfg_overlay', dict(file=file))
    return timm.create_model('inline_pvt_t', pretrained=True, num_classes=10, **pvt_arch(), **kwargs).eval()


def authors_state(file=PVT_FILE):
    return torch.load(file, weights_only=True)


def poisoned(tmp_path, key='patch_embed1.proj.weight', how='nan'):
    ckpt = authors_state()
    if how == 'nan':
        ckpt['model'][key].view(-1)[0] = float('nan')
    else:
        ckpt['model'][key] = (ckpt['model'][key] * 100).long()  # float weights written as int64
    path = tmp_path / f'{how}.pth'
    torch.save(ckpt, path)
    return str(path)


# ---------------------------------------------------------------- in_chans / in_channels
def test_in_chans_1_sums_the_rgb_kernels_so_grey_equals_rgb_of_the_same_image():
    rgb, grey = timm_pvt(), timm_pvt(in_chans=1)
    key = 'backbone.stages.0.patch_embed.proj.weight'
    assert grey.state_dict()[key].shape[1] == 1
    torch.testing.assert_close(grey.state_dict()[key], rgb.state_dict()[key].sum(1, keepdim=True))
    x = torch.randn(1, 1, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(grey(x), rgb(x.expand(-1, 3, -1, -1)), rtol=1e-4, atol=1e-4)


def test_in_chans_4_repeats_and_scales_the_kernels():
    rgb, four = timm_pvt(), timm_pvt(in_chans=4)
    key = 'backbone.stages.0.patch_embed.proj.weight'
    w = rgb.state_dict()[key]
    torch.testing.assert_close(four.state_dict()[key], torch.cat([w, w[:, :1]], 1) * 3 / 4)


def rgb_as(in_chans, x):
    """An input for the ``in_chans`` model whose first convolution gives what the RGB model's gives
    on ``x`` (B, 3, H, W): 1 channel, the grey image the summed kernels see as RGB; 4 channels
    (kernels R, G, B, R scaled by 3/4), R split over the two R kernels and everything scaled by 4/3."""
    if in_chans == 1:
        grey = x[:, :1]
        return grey, grey.expand(-1, 3, -1, -1)
    return torch.cat([x[:, :1] * 2 / 3, x[:, 1:] * 4 / 3, x[:, :1] * 2 / 3], 1), x


@pytest.mark.parametrize('in_chans', [1, 4])
@pytest.mark.parametrize('source', ['file', 'state_dict'])
def test_in_chans_loads_without_timms_first_conv_warning(caplog, source, in_chans):
    overlay = dict(file=PVT_FILE) if source == 'file' else dict(state_dict=authors_state())
    with caplog.at_level(logging.INFO, logger='timm'):
        model = timm_pvt(in_chans=in_chans, pretrained_cfg_overlay=overlay)
    timm_lines = [r for r in caplog.records if r.name.startswith('timm')]
    assert not [r.getMessage() for r in timm_lines if r.levelno >= logging.WARNING]
    assert not [r.getMessage() for r in timm_lines if 'patch_embed' in r.getMessage() or 'Missing keys' in
                r.getMessage()]
    assert model.state_dict()['backbone.stages.0.patch_embed.proj.weight'].shape[1] == in_chans
    ours, theirs = rgb_as(in_chans, torch.randn(1, 3, 64, 64))
    with torch.no_grad():
        torch.testing.assert_close(model(ours), timm_pvt()(theirs), rtol=1e-4, atol=1e-4)


def test_a_state_dict_gives_features_only_the_files_weights():
    kwargs = dict(features_only=True, num_classes=10, **pvt_arch())
    from_file = timm.create_model('inline_pvt_t', pretrained=True, pretrained_cfg_overlay=dict(file=PVT_FILE),
                                  **kwargs).eval()
    from_dict = timm.create_model('inline_pvt_t', pretrained=True,
                                  pretrained_cfg_overlay=dict(state_dict=authors_state()), **kwargs).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(from_file(x), from_dict(x)):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_smp_in_channels_follows():
    import segmentation_models_pytorch as smp
    arch = {k: v for k, v in pvt_arch().items() if k != 'drop_path_rate'}
    model = smp.FPN('tu-inline_pvt_t', encoder_weights=True, in_channels=1, classes=2,
                    pretrained_cfg_overlay=dict(file=PVT_FILE), **arch)
    conv = model.encoder.model.model.backbone.stages[0].patch_embed.proj.weight
    torch.testing.assert_close(conv, authors_state()['model']['patch_embed1.proj.weight'].sum(1, keepdim=True))


# ---------------------------------------------------------------- another head
def test_a_head_of_another_class_count_is_dropped_with_a_log_line(caplog):
    with caplog.at_level(logging.WARNING, logger='inline_dense.checkpoint'):
        model = timm.create_model('inline_pvt_t', pretrained=True, num_classes=3,
                                  pretrained_cfg_overlay=dict(file=PVT_FILE), **pvt_arch())
    assert model.head.weight.shape[0] == 3
    line = next(r.getMessage() for r in caplog.records if 'head.weight' in r.getMessage())
    assert 'head.weight (10,' in line
    assert 'head.bias (10,)' in line
    assert 'num_classes' in line


# ---------------------------------------------------------------- pretrained_cfg_overlay: timm's order
@pytest.fixture
def sources(monkeypatch):
    """Records what inline_dense.timm resolves or fetches from the hub; every source gives the fixture."""
    asked = []

    def fake_resolve(name, advice=None):
        asked.append(('resolve', name))
        return PVT_FILE

    def fake_hub(hub_id, filename):
        asked.append(('hf', hub_id, filename))
        return PVT_FILE
    monkeypatch.setattr(inline_dense.timm, 'resolve', fake_resolve)
    monkeypatch.setattr(inline_dense.timm, 'download_from_hf', fake_hub)
    monkeypatch.setattr(inline_dense.timm, 'has_hf_hub', lambda necessary=False: True)
    return asked


def test_a_users_url_is_the_one_requested(sources):
    model = timm_pvt(pretrained_cfg_overlay=dict(url='https://example.org/w/mine.pth'))
    assert sources == [('resolve', 'https://example.org/w/mine.pth')]
    assert model.pretrained_cfg['url'] == 'https://example.org/w/mine.pth'


def test_the_authors_url_resolves_as_the_short_name(sources):
    timm_pvt(pretrained_cfg_overlay=None)
    assert sources == [('resolve', 'inline://inline_pvt_t')]


def test_hf_hub_id_comes_before_url_and_file_before_both(sources):
    timm_pvt(pretrained_cfg_overlay=dict(hf_hub_id='someone/inline-pvt', url='https://example.org/x.pth'))
    assert sources == [('hf', 'someone/inline-pvt', 'model.safetensors')]
    sources.clear()
    timm_pvt(pretrained_cfg_overlay=dict(hf_hub_id='someone/inline-pvt', hf_hub_filename='w.pth'))
    assert sources == [('hf', 'someone/inline-pvt', 'w.pth')]
    sources.clear()
    timm_pvt(pretrained_cfg_overlay=dict(file='/some/file.pth', hf_hub_id='someone/inline-pvt'))
    assert sources == [('resolve', '/some/file.pth')]


def test_a_state_dict_in_the_cfg_loads_through_the_strict_loader():
    model = timm_pvt(pretrained_cfg_overlay=dict(state_dict=authors_state()))
    reference = timm_pvt()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values()))


# ---------------------------------------------------------------- URL schemes
def test_file_urls_are_local_paths_and_other_schemes_are_named():
    assert resolve('file://' + PVT_FILE) == PVT_FILE
    assert resolve('file://localhost' + PVT_FILE) == PVT_FILE
    timm_pvt(file='file://' + PVT_FILE)
    with pytest.raises(ValueError, match=r"URL scheme ftp:// is not supported"):
        resolve('ftp://example.org/w.pth')
    with pytest.raises(ValueError, match=r'scheme s3:// is not supported.*\n.*pretrained_cfg_overlay'):
        timm_pvt(file='s3://bucket/w.pth')


# ---------------------------------------------------------------- NaN / inf and integers, on every path
@pytest.mark.parametrize(('how', 'error'), [('nan', NonFiniteWeightsError), ('int', IntegerWeightsError)])
def test_timm_and_build_classifier_refuse_bad_weights(tmp_path, how, error):
    path = poisoned(tmp_path, how=how)
    with pytest.raises(error, match=r'patch_embed.proj.weight'):
        timm_pvt(file=path)
    model = InLineClassifier('pvt', num_classes=10, **pvt_arch())
    with pytest.raises(error, match=r'patch_embed.proj.weight'):
        model.load_pretrained(path)


def test_integer_weights_are_refused_by_the_backbone_loader(tmp_path):
    from inline_dense.models import InLinePVT
    arch = {k: v for k, v in pvt_arch().items() if k != 'drop_path_rate'}
    with pytest.raises(IntegerWeightsError, match=r'torch.int64 for torch.float32.*truncate'):
        load_pretrained(InLinePVT(**arch), poisoned(tmp_path, how='int'))


@pytest.mark.parametrize(('how', 'error'), [('nan', NonFiniteWeightsError), ('int', IntegerWeightsError)])
def test_deploy_refuses_bad_weights(tmp_path, how, error):
    model = torch.nn.Linear(3, 2)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state['weight'] = state['weight'].long() if how == 'int' else state['weight'].fill_(float('inf'))
    torch.save({'state_dict': state}, tmp_path / 'm.pth')
    with pytest.raises(error, match='weight'):
        load_full_checkpoint(model, str(tmp_path / 'm.pth'))
    torch.save({'state_dict': {'weight': torch.zeros(2, 3)}}, tmp_path / 'part.pth')
    with pytest.raises(CheckpointError, match=r"(?s)does not fit this config's model.*bias"):
        load_full_checkpoint(model, str(tmp_path / 'part.pth'))


# ---------------------------------------------------------------- another family's published weights
@pytest.mark.parametrize('name', ['inline://inline_swin_t', variants.VARIANTS['inline_pvt_t'].url])
def test_another_familys_published_weights_are_refused_before_any_download(name, no_local_checkpoints, monkeypatch):
    """The registry knows both families: no download is tried and the message names the family's own."""
    from inline_dense.checkpoint import cache
    from inline_dense.models import InLineDeiT
    monkeypatch.setattr(cache, 'transfer', lambda *a, **k: pytest.fail('a download was tried'))
    loads = (lambda: load_pretrained(InLineDeiT(embed_dims=16, depth=1, num_heads=2), name),
             lambda: InLineClassifier('deit', embed_dims=16, depth=1, num_heads=2, num_classes=3).load_pretrained(name))
    for load in loads:
        with pytest.raises(CheckpointError, match=r'holds InLine-(Swin|PVT)-T weights, but .* is an InLine-DeiT model'
                                                  r'.*nothing was downloaded.*Use one of inline://inline_deit_t, '
                                                  r'inline://inline_deit_s, inline://inline_deit_b') as info:
            load()
        assert len(str(info.value).splitlines()) == 1
    import inline_dense.openmmlab as mm
    with pytest.raises(CheckpointError, match='is an InLine-DeiT model'):
        mm.InLineDeiT(embed_dims=16, depth=1, num_heads=2, init_cfg=dict(type='Pretrained', checkpoint=name)
                      ).init_weights()


# ---------------------------------------------------------------- a file cut short, at any size
@pytest.mark.parametrize('size', [1_000, 5_000, 20_000, 65_000, 150_000])
def test_a_cut_file_is_one_line_at_any_size(size, tmp_path):
    """Cut to about 5-65 KB, torch's zip reader raised a bare OSError (EINVAL) instead of the
    project's message: load_pretrained and timm's file loader."""
    from inline_dense.models import InLinePVT
    data = pathlib.Path(PVT_FILE).read_bytes()
    assert len(data) > 150_000
    cut = tmp_path / 'cut.pth'
    cut.write_bytes(data[:size])
    arch = {k: v for k, v in pvt_arch().items() if k != 'drop_path_rate'}
    for load in (lambda: load_pretrained(InLinePVT(**arch), str(cut)), lambda: timm_pvt(file=str(cut))):
        with pytest.raises(CheckpointError, match='ends early or its archive is damaged') as info:
            load()
        assert len(str(info.value).splitlines()) == 1


# ---------------------------------------------------------------- the caller's terms
def test_errors_speak_the_callers_ecosystem(tmp_path):
    missing = str(tmp_path / 'absent.pth')
    with pytest.raises(FileNotFoundError) as timm_error:
        timm_pvt(file=missing)
    assert 'pretrained_cfg_overlay=dict(file=' in str(timm_error.value)
    assert 'init_cfg' not in str(timm_error.value)
    with pytest.raises(CheckpointError) as fit_error:
        timm.create_model('inline_pvt_t', pretrained=True, pretrained_cfg_overlay=dict(file=PVT_FILE))
    assert 'pretrained=False' in str(fit_error.value)
    assert 'init_cfg' not in str(fit_error.value)
    import segmentation_models_pytorch as smp
    with pytest.raises(FileNotFoundError) as smp_error:
        smp.FPN('tu-inline_pvt_t', encoder_weights=True, classes=2, pretrained_cfg_overlay=dict(file=missing))
    assert 'encoder_weights=None' in str(smp_error.value)
    assert 'init_cfg' not in str(smp_error.value)
    assert "smp.<Model>('tu-inline_pvt_t'" in str(smp_error.value)


def test_the_core_loader_speaks_plain_pytorch(tmp_path):
    """``load_pretrained`` called from plain PyTorch tells no one to edit an init_cfg; the OpenMMLab
    adapter passes its own terms (tests/families/test_backbone_errors.py)."""
    from inline_dense.models import InLinePVT
    with pytest.raises(FileNotFoundError) as info:
        load_pretrained(InLinePVT(depths=(1, 1, 1, 1)), str(tmp_path / 'absent.pth'))
    text = str(info.value)
    assert 'init_cfg' not in text
    assert "'inline://inline_pvt_t'" in text
    assert 'pass none for random weights' in text


def test_a_failed_download_speaks_timms_terms_once(no_local_checkpoints, monkeypatch):
    from inline_dense.checkpoint import DownloadError
    no_network_downloads(monkeypatch)
    with pytest.raises(DownloadError) as info:
        timm.create_model('inline_pvt_t', pretrained=True)
    text = str(info.value)
    assert 'init_cfg' not in text
    assert text.endswith('Or pretrained=False for random weights.')
    assert text.count("pretrained_cfg_overlay=dict(file='/path/to/inline_pvt_t.pth')") == 1


def test_the_variant_table_feeds_every_consumer():
    from inline_dense.analysis import zoo
    from inline_dense.checkpoint import PUBLISHED
    from inline_dense.models.classifier import VARIANTS
    from inline_dense.models.convert import detect_backbone
    assert set(PUBLISHED) == set(VARIANTS) == set(variants.VARIANTS) == set(timm.list_models('inline_*'))
    assert {variants.zoo_name(v) for v in variants.VARIANTS} <= set(zoo.backbone_zoo())
    assert PUBLISHED['inline_cswin_b'].title == 'InLine-CSwin-B'
    assert detect_backbone({'stem.conv.weight': torch.zeros(1)}) == 'InLineCSwin'
    assert detect_backbone({'block1.0.attn.q.weight': torch.zeros(1)}) == 'InLinePVT'


def test_the_fit_hook_refuses_integer_weights_too():
    from types import SimpleNamespace

    from inline_dense.openmmlab.engine import CheckpointFitHook
    model = torch.nn.Linear(2, 2)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state['weight'] = (state['weight'] * 10).long()
    with pytest.raises(IntegerWeightsError, match=r'c.pth stores 1 floating-point .*weight \(torch.int64 for '
                                                  r'torch.float32\).*as the training run saved it'):
        CheckpointFitHook(allow_partial=True, source='c.pth').after_load_checkpoint(
            SimpleNamespace(model=model), {'state_dict': state})
