"""Bad settings, inputs and checkpoints fail early, with a message naming the value and the fix."""
import os
import re

import pytest
import torch

from helpers import build_tiny
from inline_dense.checkpoint import CheckpointError
from inline_dense.models import InLineAttention
from inline_dense.openmmlab import InLineCSwin, InLinePVT, InLineSwin


def mini_swin(**kwargs) -> InLineSwin:
    return build_tiny('swin', init=False, **dict(dict(depths=(1, 1, 2, 1)), **kwargs))


def msg(*fragments: str) -> str:
    """A ``pytest.raises(match=...)`` pattern: the message holds every fragment, in any order."""
    return '(?s)' + ''.join(f'(?=.*{re.escape(f)})' for f in fragments)


# ---------------------------------------------------------------- architecture settings
@pytest.mark.parametrize(('cls', 'options'), [(InLineSwin, "['base', 'small', 'tiny']"),
                                          (InLinePVT, "['large', 'medium', 'small', 'tiny']")])
def test_unknown_arch(cls, options):
    with pytest.raises(ValueError, match=msg("unknown arch 'huge'", options, 'pass a dict')):
        cls(arch='huge')


def test_custom_arch_dict_missing_keys():
    with pytest.raises(ValueError, match=msg('needs the keys', 'attn_type')):
        InLineSwin(arch=dict(embed_dims=32, depths=(2, 2, 2, 2), num_heads=(1, 2, 4, 8)))


@pytest.mark.parametrize(('attn_type', 'fragments'), [
    ('II', ["'II' is too short", 'one letter per stage (4 stages)']),
    ('IIXS', ["unknown letter(s) ['X']", "e.g. 'IIMS2'"]),
    ('iiis', ["unknown letter(s) ['i', 's']"]),
    ('IMMS2', ['2 M stages', 'at most one']),
    ('IIMS', ['the M stage 2 has 6 blocks', 'from 1 to 5', "(got '')"]),
    ('IIMS9', ['from 1 to 5', "(got '9')"]),
    ('IIIS2', ["trailing '2' but no M stage"]),
    (['I', 'I', 'I', 'S'], ['must be a string', "'IIIS'"]),
])
def test_malformed_swin_attn_type(attn_type, fragments):
    with pytest.raises(ValueError, match=msg('InLineSwin', *fragments)):
        InLineSwin(attn_type=attn_type)


def test_pvt_has_no_mixed_stage():
    with pytest.raises(ValueError, match=msg("InLinePVT: attn_type 'IIMI1' has unknown letter(s) ['M']",
                                             '{I, S}')):
        InLinePVT(attn_type='IIMI1')


@pytest.mark.parametrize(('build', 'fragments'), [
    (lambda: mini_swin(embed_dims=18, num_heads=(4, 2, 4, 8)),
     ['InLineSwin stage 0', 'embed_dims=18 is not divisible by num_heads=4', 'divisors of 18']),
    (lambda: InLinePVT(num_heads=(3, 4, 10, 16)),
     ['InLinePVT stage 0', 'embed_dims=64 is not divisible by num_heads=3']),
    (lambda: InLineAttention(96, 5), ['embed_dims=96 is not divisible by num_heads=5']),
])
def test_embed_dims_not_divisible_by_heads(build, fragments):
    with pytest.raises(ValueError, match=msg(*fragments)):
        build()


@pytest.mark.parametrize(('build', 'fragments'), [
    (lambda: mini_swin(num_heads=(1, 2, 4)), ['num_heads=[1, 2, 4] has 3 entries', 'one per stage (4)']),
    (lambda: mini_swin(out_indices=(0, 4)), ['out_indices (0, 4)', 'subset of (0, 1, 2, 3)']),
    (lambda: mini_swin(frozen_stages=7), ['frozen_stages=7', '[-1, 4]']),
    (lambda: mini_swin(kernel='gelu'), ["unknown kernel 'gelu'", "'identity'"]),
    (lambda: InLinePVT(sr_ratios=(8, 4, 2)), ['sr_ratios=[8, 4, 2] has 3 entries']),
])
def test_other_settings(build, fragments):
    with pytest.raises(ValueError, match=msg(*fragments)):
        build()


# ---------------------------------------------------------------- inputs
@pytest.fixture(scope='module')
def swin():
    return mini_swin().eval()


@pytest.mark.parametrize('shape', [(3, 64, 64), (1, 1, 64, 64), (1, 4, 64, 64), (1, 3, 64)])
def test_wrong_input_rank_or_channels(swin, shape):
    with pytest.raises(ValueError, match=msg(f'expected an input of shape (B, 3, H, W), got {shape}',
                                             'set in_channels')):
        swin(torch.zeros(shape))


@pytest.mark.parametrize('valid_hw', [[(64, 64), (32, 32)], [(80, 64)], [(0, 10)]])
def test_bad_valid_hw(swin, valid_hw):
    with pytest.raises(ValueError, match=msg('valid_hw=', 'one (height, width) per image (1)', 'img_shape')):
        swin(torch.zeros(1, 3, 64, 64), valid_hw)


# ---------------------------------------------------------------- checkpoints
def pretrained(cls=InLineSwin, path='x.pth', **kwargs):
    model = cls(init_cfg=dict(type='Pretrained', checkpoint=str(path)), **kwargs)
    model.init_weights()
    return model


@pytest.fixture(scope='module')
def tiny_checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp('ckpt') / 'inline_swin_tiny.pth'
    torch.save(InLineSwin(arch='tiny').state_dict(), path)
    return path


def test_checkpoint_of_another_variant_lists_keys(tiny_checkpoint):
    # 'small' has 18 blocks in stage 3, softmax ones: keys missing and keys unexpected
    tiny_keys = set(torch.load(tiny_checkpoint, weights_only=True))
    small_keys = set(InLineSwin(arch='small').state_dict())
    expected = msg('does not fit this backbone', 'another variant', f"{len(small_keys - tiny_keys)} of the model's",
                   f'{len(tiny_keys - small_keys)} in the checkpoint that the model does not have',
                   'stages.2.blocks.0.attn.w_msa.qkv.weight',
                   'stages.2.blocks.0.attn.qkv.weight')
    with pytest.raises(CheckpointError, match=expected):
        pretrained(arch='small', path=tiny_checkpoint)


def test_checkpoint_with_other_embed_dims_lists_shapes(tiny_checkpoint, tmp_path):
    # also through an mmengine checkpoint of a whole detector (keys under 'backbone.')
    state = {'backbone.' + k: v for k, v in torch.load(tiny_checkpoint, weights_only=True).items()}
    path = tmp_path / 'detector.pth'
    torch.save({'meta': {}, 'state_dict': state}, path)
    expected = msg('with another shape', 'patch_embed.proj.weight: checkpoint (96, 3, 4, 4) vs model (48, 3, 4, 4)')
    with pytest.raises(CheckpointError, match=expected):
        pretrained(arch='tiny', embed_dims=48, path=path)


def test_swin_checkpoint_into_pvt(tiny_checkpoint):
    with pytest.raises(CheckpointError, match=msg('InLinePVT', 'missing from the checkpoint', 'stages.0.pos_embed',
                                                  'that the model does not have')):
        pretrained(InLinePVT, path=tiny_checkpoint, depths=(1, 1, 1, 1))


def test_truncated_checkpoint(tiny_checkpoint, tmp_path):
    data = tiny_checkpoint.read_bytes()
    path = tmp_path / 'truncated.pth'
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(CheckpointError, match=msg(str(path), 'not a readable PyTorch checkpoint', 'truncated',
                                                  'download or save it again')):
        pretrained(path=path, arch='tiny')


@pytest.mark.parametrize(('content', 'fragments'), [
    (b'', ['not a readable PyTorch checkpoint']),
    (b'hello, I am a text file\n', ['not a readable PyTorch checkpoint', 'not a checkpoint at all']),
    ([1, 2, 3], ['holds a list, not a checkpoint dict']),
    ({'epoch': 3}, ["non-tensor entries: ['epoch']"]),
    ({'state_dict': {}}, ['is not a state dict of tensors (it is empty)']),
])
def test_not_a_checkpoint(tmp_path, content, fragments):
    path = tmp_path / 'bad.pth'
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(CheckpointError, match=msg(*fragments)):
        pretrained(path=path, **dict(embed_dims=16, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8)))


def test_missing_pretrained_path(tmp_path):
    path = tmp_path / 'nowhere' / 'inline_swin_t.pth'
    with pytest.raises(FileNotFoundError, match=msg(str(path), 'does not exist', 'init_cfg.checkpoint')):
        pretrained(path=path, **dict(embed_dims=16, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8)))


def test_pretrained_without_path():
    with pytest.raises(ValueError, match=msg("init_cfg=dict(type='Pretrained') needs checkpoint=PATH")):
        InLineSwin(init_cfg=dict(type='Pretrained'))


def test_errors_surface_through_mmdet_registry(tmp_path):
    """What a user of a config sees: the same messages from MODELS.build / init_weights."""
    registry = pytest.importorskip('mmdet.registry')
    with pytest.raises(ValueError, match=msg("unknown arch 'tiniest'")):
        registry.MODELS.build(dict(type='InLineSwin', arch='tiniest'))
    model = registry.MODELS.build(dict(type='InLinePVT', depths=(1, 1, 1, 1), init_cfg=dict(
        type='Pretrained', checkpoint=str(tmp_path / 'missing.pth'))))
    with pytest.raises(FileNotFoundError, match=msg('missing.pth', 'does not exist')):
        model.init_weights()
    assert not os.path.exists(tmp_path / 'missing.pth')


# ---------------------------------------------------------------- init_cfg forms, as mmengine allows them
@pytest.mark.parametrize('init_cfg', ['checkpoints/inline_swin_t.pth', 3, [dict(checkpoint='x.pth')], ['x.pth']])
def test_init_cfg_of_the_wrong_type(init_cfg):
    with pytest.raises(TypeError, match=re.escape("init_cfg must be None, a dict with a 'type'")):
        mini_swin(init_cfg=init_cfg)


def test_init_cfg_list_runs_initialisers_and_the_strict_loader(tiny_checkpoint, tmp_path):
    """A list mixes mmengine initialisers and a Pretrained entry; the latter stays strict."""
    saved = torch.load(tiny_checkpoint, weights_only=True)
    path = tmp_path / 'no_output_norms.pth'  # as in a classification checkpoint
    torch.save({k: v for k, v in saved.items() if not k.startswith('out_norms.')}, path)
    model = InLineSwin(arch='tiny', init_cfg=[dict(type='Constant', layer='LayerNorm', val=2.0, bias=0.5),
                                              dict(type='Pretrained', checkpoint=str(path))])
    model.init_weights()
    torch.testing.assert_close(model.stages[0].blocks[0].norm1.weight, saved['stages.0.blocks.0.norm1.weight'])
    assert torch.all(model.out_norms['0'].weight == 2.0)  # not in the checkpoint: the initialiser's value
    only_init = InLineSwin(arch='tiny', init_cfg=[dict(type='Constant', layer='LayerNorm', val=3.0)])
    only_init.init_weights()
    assert torch.all(only_init.stages[1].blocks[0].norm2.weight == 3.0)
    bad = mini_swin(init_cfg=[dict(type='Pretrained', checkpoint=str(tiny_checkpoint))])
    with pytest.raises(CheckpointError, match=msg('does not fit this backbone')):
        bad.init_weights()


def test_pretrained_option_that_is_not_supported(tiny_checkpoint):
    model = InLineSwin(arch='tiny', init_cfg=dict(type='Pretrained', checkpoint=str(tiny_checkpoint),
                                                  revise_keys=[]))
    with pytest.raises(ValueError, match=r"option\(s\) \['revise_keys'\] are not supported.*'prefix'"):
        model.init_weights()


@pytest.mark.parametrize('size', [224, (224,), (224, 224), [160, 288]])
def test_pvt_pretrain_img_size_forms(size):
    model = InLinePVT(depths=(1, 1, 1, 1), pretrain_img_size=size)
    expected = (size, size) if isinstance(size, int) else (size[0], size[-1])
    assert model.stages[0].pos_hw == (expected[0] // 4, expected[1] // 4)


@pytest.mark.parametrize('size', ['224', (224, 224, 3), 22.4])
def test_pvt_pretrain_img_size_bad(size):
    with pytest.raises(TypeError, match='pretrain_img_size must be an int or a tuple of 1 or 2 ints'):
        InLinePVT(pretrain_img_size=size)


def test_cswin_two_branch_stage_needs_even_heads():
    with pytest.raises(ValueError, match=r'InLineCSwin stage 2: .*splits its 3 heads in half'):
        InLineCSwin(embed_dims=24, depths=(1, 1, 1, 1), num_heads=(1, 2, 3, 8), attn_type='IISS')


def test_cswin_split_size_per_stage():
    with pytest.raises(ValueError, match=re.escape('split_size=[1, 2, 7] has 3 entries')):
        InLineCSwin(split_size=(1, 2, 7))
