"""InLine-DeiT at the edges of timm's and smp's contracts for a plain ViT, against timm's own
``VisionTransformer``: ``forward_intermediates(return_prefix_tokens=True, output_fmt='NLC')``,
``img_size`` in the pretrained cfg (what ``resolve_data_config`` reads), a checkpoint's position grid
resampled on load with a log line, ``features_only``'s default outputs (the last three blocks) and no
word about a head it prunes; smp's DPT (its decoder for plain ViTs) on ``tu-inline_deit_t``, end to end."""
import logging

import pytest
import segmentation_models_pytorch as smp
import timm
import torch
from reference_models import authors_checkpoint, load_reference

import inline_dense.smp  # noqa: F401  (registers the models with timm and smp)
from helpers import SHALLOW
from inline_dense.timm import default_out_indices

VARIANT = 'inline_deit_t'
FIXTURE = 'inline_deit_mini'  # the authors' model at 112 px: a 7x7 position grid


@pytest.fixture
def core_log():
    """The records of the core's logger (``inline_dense``), whatever handler the session gave it."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger('inline_dense')
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(level)


def small(**kwargs):
    torch.manual_seed(0)
    return timm.create_model(VARIANT, drop_path_rate=0.0, **SHALLOW[VARIANT], **kwargs).eval()


def timm_vit(**kwargs):
    """timm's own ViT of the same shape (4 blocks, 16 wide): the contract's reference."""
    return timm.create_model('vit_tiny_patch16_224', embed_dim=16, num_heads=2, depth=4, **kwargs).eval()


def mini(**kwargs):
    """The fixture's width and depth (its checkpoint loads into it)."""
    a = load_reference(FIXTURE)['arch']
    return dict(embed_dims=a['embed_dim'], depth=a['depth'], num_heads=a['num_heads'], mlp_ratio=2.0, **kwargs)


# ----------------------------------------------------------------------------- forward_intermediates
@pytest.mark.parametrize('norm', [False, True])
@pytest.mark.parametrize('fmt', ['NCHW', 'NLC'])
def test_forward_intermediates_returns_prefix_tokens_as_timms_vit(fmt, norm):
    x = torch.randn(2, 3, 64, 96)
    ours, theirs = small(), timm_vit(img_size=(64, 96))
    with torch.no_grad():
        final, pairs = ours.forward_intermediates(x, indices=[1, 3], norm=norm, output_fmt=fmt,
                                                  return_prefix_tokens=True)
        ref_final, ref_pairs = theirs.forward_intermediates(x, indices=[1, 3], norm=norm, output_fmt=fmt,
                                                            return_prefix_tokens=True)
        maps = ours.forward_intermediates(x, indices=[1, 3], norm=norm, intermediates_only=True)
        tokens = ours.forward_features(x)
    assert final.shape == ref_final.shape == tokens.shape
    assert [tuple(m.shape) for m, _ in pairs] == [tuple(m.shape) for m, _ in ref_pairs]
    assert [tuple(p.shape) for _, p in pairs] == [tuple(p.shape) for _, p in ref_pairs] == [(2, 1, 16)] * 2
    for (grid, _), full in zip(pairs, maps):  # NLC: the grid's tokens, row-major, without the prefix
        torch.testing.assert_close(grid, full if fmt == 'NCHW' else full.flatten(2).transpose(1, 2), rtol=0, atol=0)
    if norm:  # the last block's prefix token through the final norm: the final features' cls token
        torch.testing.assert_close(pairs[-1][1], tokens[:, :1], rtol=0, atol=0)
    with torch.no_grad():
        only = ours.forward_intermediates(x, indices=2, intermediates_only=True, return_prefix_tokens=True)
    assert len(only) == 2
    assert all(isinstance(pair, tuple) and len(pair) == 2 for pair in only)


def test_a_pyramid_ignores_return_prefix_tokens_and_gives_nlc():
    model = timm.create_model('inline_pvt_t', **SHALLOW['inline_pvt_t']).eval()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        maps = model.forward_intermediates(x, intermediates_only=True, return_prefix_tokens=True)
        nlc = model.forward_intermediates(x, intermediates_only=True, output_fmt='NLC')
    assert all(isinstance(m, torch.Tensor) for m in maps)
    for a, b in zip(maps, nlc):
        torch.testing.assert_close(a.flatten(2).transpose(1, 2), b, rtol=0, atol=0)
    with pytest.raises(ValueError, match="output_fmt='NDHW'"):
        model.forward_intermediates(x, output_fmt='NDHW')


# ----------------------------------------------------------------------------- img_size
@pytest.mark.parametrize('features_only', [False, True])
def test_img_size_sets_the_pretrained_cfg_and_the_position_grid(features_only):
    model = timm.create_model(VARIANT, img_size=384, features_only=features_only)
    assert model.pretrained_cfg['input_size'] == (3, 384, 384)
    assert timm.data.resolve_data_config({}, model=model)['input_size'] == (3, 384, 384)
    assert model.pretrained_cfg['pool_size'] == (24, 24)
    backbone = model.backbone if not features_only else model.model.backbone
    assert backbone.patch_embed.pos_embed.shape == (*timm_vit(img_size=384).pos_embed.shape[:2], 192)
    assert timm.create_model(VARIANT).pretrained_cfg['input_size'] == (3, 224, 224)  # not given: the authors'


def test_a_pyramid_takes_img_size_into_its_pretrained_cfg_only():
    model = timm.create_model('inline_pvt_t', img_size=(320, 256))
    assert model.pretrained_cfg['input_size'] == (3, 320, 256)
    assert model.pretrained_cfg['pool_size'] == (10, 8)
    assert timm.create_model('inline_pvt_t', img_size=(320, 256), pretrained_cfg_overlay=dict(
        input_size=(3, 224, 224))).pretrained_cfg['input_size'] == (3, 224, 224)  # an explicit overlay wins


# ----------------------------------------------------------------------------- a grid of another size on load
def test_timm_resamples_a_checkpoints_position_grid_on_load(core_log):
    """The fixture's grid (112 px, 7x7) into a model made for 224 (14x14): timm's resample_abs_pos_embed."""
    from timm.layers import resample_abs_pos_embed
    model = timm.create_model(VARIANT, pretrained=True, num_classes=10, img_size=224, **mini(),
                              pretrained_cfg_overlay=dict(file=authors_checkpoint(FIXTURE)))
    theirs = torch.load(authors_checkpoint(FIXTURE), weights_only=True)['model']['pos_embed']
    torch.testing.assert_close(model.backbone.patch_embed.pos_embed.detach(),
                               resample_abs_pos_embed(theirs, [14, 14], num_prefix_tokens=1), rtol=0, atol=1e-6)
    said = [r.getMessage() for r in core_log if 'position embedding' in r.getMessage()]
    assert len(said) == 1
    assert 'from a 7x7 grid (trained at 112 px) to this model\'s 14x14' in said[0]
    assert core_log[-1].getMessage().startswith('InLineClassifier: loaded 72 tensors')  # all, head included


# ----------------------------------------------------------------------------- features_only
def test_features_only_defaults_to_the_last_three_blocks_as_timms_vit():
    ours = small(features_only=True)
    theirs = timm_vit(features_only=True)
    assert ours.feature_info.out_indices == theirs.feature_info.out_indices == (1, 2, 3)
    assert default_out_indices(VARIANT) == (9, 10, 11)  # the preset's 12 blocks
    with torch.no_grad():
        assert len(ours(torch.randn(1, 3, 64, 64))) == 3
    assert small(features_only=True, out_indices=(0, 1, 2, 3)).feature_info.out_indices == (0, 1, 2, 3)
    assert timm.create_model('inline_swin_t', features_only=True).feature_info.out_indices == (0, 1, 2, 3)


def test_features_only_says_nothing_of_a_head_it_has_not(core_log):
    model = timm.create_model(VARIANT, features_only=True, pretrained=True, num_classes=10, img_size=112, **mini(),
                              pretrained_cfg_overlay=dict(file=authors_checkpoint(FIXTURE)))
    messages = [r.getMessage() for r in core_log]
    assert not [m for m in messages if 'not loading' in m or (r'head.weight' in m and 'another shape' in m)]
    assert not [r for r in core_log if r.levelno >= logging.WARNING]
    assert 'dropped 2 unused (head x2)' in messages[-1]
    assert model.feature_info.out_indices == (1, 2, 3)


# ----------------------------------------------------------------------------- smp's DPT
@pytest.fixture(scope='module')
def narrow_checkpoint(tmp_path_factory) -> str:
    """An InLine-DeiT-T of 12 blocks, 16 wide, trained (say) at 112 px: a timm checkpoint of ours."""
    torch.manual_seed(1)
    model = timm.create_model(VARIANT, embed_dims=16, num_heads=2, img_size=112)
    path = tmp_path_factory.mktemp('deit') / 'narrow.pth'
    torch.save({'model': model.state_dict()}, path)
    return str(path)


@pytest.mark.parametrize('readout', ['cat', 'ignore'])
def test_smp_dpt_on_inline_deit_end_to_end(readout, narrow_checkpoint, core_log):
    """DPT, smp's decoder for plain ViTs: built on tu-inline_deit_t with pretrained weights (their grid
    resampled to img_size), trained one step, evaluated at two sizes."""
    torch.manual_seed(0)
    model = smp.DPT('tu-inline_deit_t', encoder_weights='imagenet', encoder_depth=4, classes=3,
                    decoder_readout=readout, decoder_intermediate_channels=(16, 32, 32, 32),
                    decoder_fusion_channels=16, img_size=64, embed_dims=16, num_heads=2,
                    pretrained_cfg_overlay=dict(file=narrow_checkpoint))
    assert any('from a 7x7 grid (trained at 112 px) to this model\'s 4x4' in r.getMessage() for r in core_log)
    assert model.encoder.has_prefix_tokens
    assert model.encoder._output_indices == [2, 5, 8, 11]
    x, target = torch.randn(2, 3, 64, 64), torch.randint(0, 3, (2, 64, 64))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = torch.nn.functional.cross_entropy(model.train()(x), target)
    loss.backward()
    assert model.encoder.model.backbone.patch_embed.proj.weight.grad.abs().sum() > 0
    optimizer.step()
    with torch.no_grad():
        assert model.eval()(x).shape == (2, 3, 64, 64)
        assert model(torch.randn(1, 3, 96, 128)).shape == (1, 3, 96, 128)


def test_smp_multi_stride_decoders_point_to_dpt():
    with pytest.raises(ValueError, match=r'stride 16 only .*use smp\.DPT'):
        smp.Unet('tu-inline_deit_t', encoder_weights=None, classes=2)
