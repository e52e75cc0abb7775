"""What only InLine-DeiT does: the authors' cls token and logits, sizes the fixture never names, the
position grid resampled as timm's ViTs, the cls token option, blocks as ``out_indices`` /
``frozen_stages``, and padding independence of the cls token. The shared contract (any size, tracing,
the ecosystems) is ``test_contract.py``'s."""
import math
import re

import pytest
import torch
from deit_reference import AuthorsDeiT, randomise
from reference_models import authors_checkpoint, load_reference

from inline_dense.checkpoint import load_pretrained
from inline_dense.layers.inline_attention import InLineAttention
from inline_dense.models import InLineDeiT
from inline_dense.models.classifier import InLineClassifier
from inline_dense.registry import family

TOL = 1e-4
FIXTURE = 'inline_deit_mini'
SPEC = family('deit')


def errors(ours, theirs):
    """Per pair: (max abs error, max abs error / max abs reference)."""
    return [((o - t).abs().max().item(), ((o - t).abs().max() / t.abs().max()).item()) for o, t in zip(ours, theirs)]


def mini_arch():
    a = load_reference(FIXTURE)['arch']
    return dict(embed_dims=a['embed_dim'], depth=a['depth'], num_heads=a['num_heads'], pretrain_img_size=a['img_size'])


def classifier_from(checkpoint, arch, **kwargs) -> InLineClassifier:
    model = InLineClassifier('deit', arch=arch, num_classes=10, drop_path_rate=0.0, **kwargs)
    model.load_pretrained(checkpoint)
    return model.eval()


def backbone_from(checkpoint, arch, blocks, **kwargs) -> InLineDeiT:
    """Every one of its ``blocks`` an output."""
    model = InLineDeiT(arch, out_indices=tuple(range(blocks)), out_norm=False, drop_path_rate=0.0, **kwargs)
    load_pretrained(model, checkpoint)
    return model.eval()


# ---------------------------------------------------------------- the authors' fixture
@pytest.mark.parametrize('impl', ['auto', 'reference'])
def test_every_block_cls_token_and_the_logits_match_the_fixture(impl):
    ref = load_reference(FIXTURE)
    arch = mini_arch()
    backbone = backbone_from(authors_checkpoint(FIXTURE), arch, arch['depth'], mlp_ratio=2.0, attn_impl=impl)
    classifier = classifier_from(authors_checkpoint(FIXTURE), arch, mlp_ratio=2.0, attn_impl=impl)
    with torch.no_grad():
        for case in ref['cases']:
            maps, prefixes = backbone.forward_with_prefix(case['input'])
            block_err = errors(maps, case['stages'])
            cls_err = errors([p[:, 0] for p in prefixes], case['cls'])
            logit_err = errors([classifier(case['input'])], [case['logits']])
            print(impl, 'blocks', [f'{a:.1e}/{b:.1e}' for a, b in block_err],
                  'cls', [f'{a:.1e}/{b:.1e}' for a, b in cls_err], 'logits', '{:.1e}/{:.1e}'.format(*logit_err[0]))
            assert max(e for e, _ in block_err + cls_err + logit_err) < TOL


def test_the_rebuilt_reference_is_the_authors_model():
    """The reference these tests rebuild from the facts reproduces the fixture: it may stand in for
    the authors' model at sizes the fixture never names."""
    ref = load_reference(FIXTURE)
    a = ref['arch']
    model = AuthorsDeiT(a['img_size'], a['patch_size'], a['embed_dim'], a['depth'], a['num_heads'], a['mlp_ratio'])
    model.load_state_dict(torch.load(authors_checkpoint(FIXTURE), weights_only=True)['model'])
    with torch.no_grad():
        maps, cls, logits = model.eval()(ref['cases'][0]['input'])
    case = ref['cases'][0]
    assert max(e for e, _ in errors(maps + cls + [logits], case['stages'] + case['cls'] + [case['logits']])) < TOL


# ---------------------------------------------------------------- sizes and presets the fixture never names
def authors_file(tmp_path, model: AuthorsDeiT) -> str:
    path = tmp_path / 'authors.pth'
    torch.save({'model': model.state_dict(), 'epoch': 1}, path)
    return str(path)


@pytest.mark.parametrize('preset', list(SPEC.presets))
def test_each_preset_matches_the_authors_model_at_other_sizes(preset, tmp_path):
    """Each preset's width, heads and position grid (224 / 288 / 448), two blocks, random weights:
    at its training size, non-square, not a multiple of 16, and a batch of two."""
    p = SPEC.presets[preset]
    theirs = randomise(AuthorsDeiT(p['pretrain_img_size'], 16, p['embed_dims'], 2, p['num_heads']), seed=len(preset))
    path = authors_file(tmp_path, theirs)
    ours = backbone_from(path, preset, 2, depth=2)
    classifier = classifier_from(path, preset, depth=2)
    size = p['pretrain_img_size']
    worst = []
    torch.manual_seed(0)
    for shape in [(1, size, size), (1, 150, 230), (2, 64, 97)]:
        x = torch.randn(shape[0], 3, *shape[1:])
        with torch.no_grad():
            maps, cls, logits = theirs(x)
            got, prefixes = ours.forward_with_prefix(x)
            found = errors(got + [q[:, 0] for q in prefixes] + [classifier(x)], maps + cls + [logits])
        print(preset, shape, [f'{a:.1e}/{b:.1e}' for a, b in found])
        worst += [e for e, _ in found]
    assert max(worst) < TOL


def test_the_reference_can_tell_a_wrong_position_grid(tmp_path):
    """The comparison above can fail: a bilinear grid (PVT's) instead of timm's bicubic one."""
    theirs = randomise(AuthorsDeiT(224, 16, 32, 1, 2), seed=3)
    ours = backbone_from(authors_file(tmp_path, theirs), dict(embed_dims=32, depth=1, num_heads=2,
                                                               pretrain_img_size=224), 1)
    x = torch.randn(1, 3, 150, 230)
    with torch.no_grad():
        assert (ours(x)[0] - theirs(x)[0][0]).abs().max() < TOL
        from inline_dense.layers import position
        original = position.resize_pos_grid
        try:
            position.resize_pos_grid = lambda e, s, d, mode='bilinear': original(e, s, d, 'bilinear')
            assert (ours(x)[0] - theirs(x)[0][0]).abs().max() > 1e-3
        finally:
            position.resize_pos_grid = original


# ---------------------------------------------------------------- a checkpoint trained at another size
def grid_records():
    """The core's log lines about a resampled position grid, whatever handler the session gave it."""
    import logging
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    return records, handler


@pytest.mark.parametrize('path', ['load_pretrained', 'init_cfg', 'classifier'])
def test_a_checkpoint_of_another_grid_is_resampled_on_load_with_a_log_line(path):
    """The fixture was trained at 112 px (a 7x7 grid); a model made for 224 (14x14) takes it resampled
    as timm's resample_abs_pos_embed does, and says so; the rest of the weights load unchanged."""
    import logging

    from timm.layers import resample_abs_pos_embed
    records, handler = grid_records()
    logger = logging.getLogger('inline_dense')
    logger.addHandler(handler)
    arch = dict(mini_arch(), pretrain_img_size=224)
    try:
        if path == 'load_pretrained':
            model = InLineDeiT(arch, mlp_ratio=2.0, out_indices=(3,))
            load_pretrained(model, authors_checkpoint(FIXTURE))
        elif path == 'init_cfg':  # the OpenMMLab adapter: init_cfg=dict(type='Pretrained', ...), as mmseg's ViT
            import inline_dense.openmmlab as mm
            model = mm.InLineDeiT(arch, mlp_ratio=2.0, out_indices=(3,), init_cfg=dict(
                type='Pretrained', checkpoint=authors_checkpoint(FIXTURE)))
            model.init_weights()
        else:
            model = classifier_from(authors_checkpoint(FIXTURE), arch, mlp_ratio=2.0).backbone
    finally:
        logger.removeHandler(handler)
    theirs = torch.load(authors_checkpoint(FIXTURE), weights_only=True)['model']
    torch.testing.assert_close(model.patch_embed.pos_embed.detach(),
                               resample_abs_pos_embed(theirs['pos_embed'], [14, 14], num_prefix_tokens=1),
                               rtol=0, atol=1e-6)
    torch.testing.assert_close(model.stages[3].blocks[0].attn.qkv.weight.detach(), theirs['blocks.3.attn.qkv.weight'])
    said = [m for m in records if 'position embedding' in m]
    assert said == ["InLineDeiT: resampled the checkpoint's position embedding from a 7x7 grid (trained at 112 px) "
                    "to this model's 14x14 (pretrain_img_size 224x224), bicubic, as timm and mmseg do on load"]


def test_other_loads_of_another_grid_stay_strict(tmp_path):
    """A whole model's weights (load_from, tools/test.py, deploy) are not resampled: the fit check and the
    strict loader still name the position embedding; so is a grid that is not square."""
    from inline_dense.checkpoint import CheckpointError
    from inline_dense.checkpoint.loading import fit_report, load_state
    small, large = (InLineDeiT(dict(mini_arch(), pretrain_img_size=size), mlp_ratio=2.0) for size in (112, 224))
    with pytest.raises(CheckpointError, match=r'pos_embed: checkpoint \(1, 50, 64\) vs model \(1, 197, 64\)'):
        load_state(large, small.state_dict(), 'a whole model')
    assert any('with another shape' in line for line in fit_report(large.state_dict(), small.state_dict()))
    oblong = InLineDeiT(dict(mini_arch(), pretrain_img_size=(112, 224)), mlp_ratio=2.0)  # 7x14: not square
    torch.save({'state_dict': oblong.state_dict()}, tmp_path / 'oblong.pth')
    with pytest.raises(CheckpointError, match=r'patch_embed\.pos_embed'):
        load_pretrained(large, str(tmp_path / 'oblong.pth'))


# ---------------------------------------------------------------- the dense backbone
@pytest.mark.parametrize('hw', [(32, 32), (33, 47), (100, 36), (16, 16)])
def test_any_size_gives_a_stride_16_map_per_chosen_block(hw):
    model = InLineDeiT(embed_dims=16, depth=3, num_heads=2, out_indices=(0, 2), drop_path_rate=0.0).eval()
    with torch.no_grad():
        outs = model(torch.randn(2, 3, *hw))
    assert [tuple(o.shape) for o in outs] == [(2, 16, math.ceil(hw[0] / 16), math.ceil(hw[1] / 16))] * 2
    assert [o['reduction'] for o in model.output_info()] == [16] * 3


@pytest.mark.parametrize('with_cls_token', [True, False])
@pytest.mark.parametrize('impl', ['auto', 'reference'])
def test_an_image_padded_in_a_batch_gives_what_it_gives_alone(with_cls_token, impl):
    """cls token, token means and the local residual ignore the padding (``valid_hw``)."""
    torch.manual_seed(0)
    model = InLineDeiT(embed_dims=32, depth=2, num_heads=2, out_indices=(0, 1), pretrain_img_size=64,
                       with_cls_token=with_cls_token, attn_impl=impl, drop_path_rate=0.0).eval()
    small, large = torch.randn(1, 3, 50, 75), torch.randn(1, 3, 96, 128)
    batch = torch.zeros(2, 3, 96, 128)
    batch[0, :, :50, :75], batch[1] = small[0], large[0]
    with torch.no_grad():
        alone, alone_prefix = model.forward_with_prefix(small)
        padded, padded_prefix = model.forward_with_prefix(batch, valid_hw=[(50, 75), (96, 128)])
        unmasked, _ = model.forward_with_prefix(batch)
    for a, p, u in zip(alone, padded, unmasked):
        assert (p[:1, :, :4, :5] - a).abs().max() < 1e-4
        assert (u[:1, :, :4, :5] - a).abs().max() > 1e-3  # without valid_hw the padding counts
    for a, p in zip(alone_prefix, padded_prefix):
        assert a.shape[1] == int(with_cls_token) and (p[:1] - a).abs().max() < 1e-4 if with_cls_token else True


def test_without_the_cls_token_no_prefix_token_reaches_the_blocks():
    torch.manual_seed(0)
    kept = InLineDeiT(embed_dims=16, depth=2, num_heads=2, drop_path_rate=0.0).eval()
    dropped = InLineDeiT(embed_dims=16, depth=2, num_heads=2, drop_path_rate=0.0, with_cls_token=False).eval()
    dropped.load_state_dict(kept.state_dict())  # the same weights: the cls token stays a parameter
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        assert (kept(x)[0] - dropped(x)[0]).abs().max() > 1e-3
        _maps, prefixes = dropped.forward_with_prefix(x)
    assert prefixes[0].shape == (1, 0, 16)
    assert all(m.num_prefix_tokens == 0 for m in dropped.modules() if isinstance(m, InLineAttention))


def test_out_indices_count_blocks_from_the_end_as_mmseg():
    model = InLineDeiT(embed_dims=16, depth=5, num_heads=2)
    assert model.out_indices == [4]
    assert list(model.out_norms) == ['4']
    assert InLineDeiT(embed_dims=16, depth=5, num_heads=2, out_indices=(1, -1)).out_indices == [1, 4]
    assert model.out_norms['4'].eps == 1e-6  # the authors' final norm's
    with pytest.raises(ValueError, match=r'subset of \(0, 1, 2, 3, 4\)'):
        InLineDeiT(embed_dims=16, depth=5, num_heads=2, out_indices=(5,))


@pytest.mark.parametrize('given', [(-5,), (0, -6), (-9, -1)])
def test_a_negative_index_beyond_the_blocks_is_named_as_written(given):
    """(-5,) on four blocks was reported as (-1,), the index after shifting."""
    with pytest.raises(ValueError, match=rf'out_indices {re.escape(str(given))} must be block indices in '
                                         r'\[-4, 3\] \(this model has 4 blocks'):
        InLineDeiT(embed_dims=16, depth=4, num_heads=2, out_indices=given)
    assert InLineDeiT(embed_dims=16, depth=4, num_heads=2, out_indices=(-4, -1)).out_indices == [0, 3]


def test_the_authors_final_norm_is_the_last_blocks_output_norm():
    ckpt = torch.load(authors_checkpoint(FIXTURE), weights_only=True)['model']
    dense = InLineDeiT(mini_arch(), mlp_ratio=2.0, out_indices=(3,))
    load_pretrained(dense, authors_checkpoint(FIXTURE))
    torch.testing.assert_close(dense.out_norms['3'].weight, ckpt['norm.weight'])
    torch.testing.assert_close(dense.patch_embed.pos_embed, ckpt['pos_embed'])


@pytest.mark.parametrize('frozen', [0, 2])
def test_frozen_stages_freeze_the_embeddings_and_the_first_blocks(frozen):
    model = InLineDeiT(embed_dims=16, depth=3, num_heads=2, frozen_stages=frozen).train()
    frozen_names = {n for n, p in model.named_parameters() if not p.requires_grad}
    stem = {'patch_embed.proj.weight', 'patch_embed.proj.bias', 'patch_embed.cls_token', 'patch_embed.pos_embed'}
    blocks = {n for n, _ in model.named_parameters() if any(n.startswith(f'stages.{i}.') for i in range(frozen))}
    assert frozen_names == stem | blocks
    assert not model.patch_embed.training
    assert model.stages[frozen].training


def test_drop_path_grows_over_the_blocks():
    model = InLineDeiT(embed_dims=16, depth=4, num_heads=2, drop_path_rate=0.3)
    rates = [stage.blocks[0].drop_path.drop_prob for stage in model.stages[1:]]
    assert rates == pytest.approx([0.1, 0.2, 0.3])


def test_gradient_checkpointing_gives_the_same_gradients():
    torch.manual_seed(0)
    plain = InLineDeiT(embed_dims=16, depth=2, num_heads=2, drop_path_rate=0.0)
    ckpt = InLineDeiT(embed_dims=16, depth=2, num_heads=2, drop_path_rate=0.0, with_cp=True)
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(1, 3, 48, 64)
    for model in (plain, ckpt):
        model(x)[0].square().sum().backward()
    for (name, a), (_, b) in zip(plain.named_parameters(), ckpt.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)


@pytest.mark.parametrize(('kwargs', 'message'), [
    (dict(num_heads=(2, 2)), 'num_heads=.* must be a positive int'),
    (dict(depth=0), 'depth=0 must be a positive int'),
    (dict(pretrain_img_size=100), 'pretrain_img_size=.* multiples of 16'),
    (dict(with_cls_token='yes'), r'with_cls_token=.* \(a bool\)'),
])
def test_wrong_arguments_are_refused_naming_them(kwargs, message):
    with pytest.raises((TypeError, ValueError), match=message):
        InLineDeiT(**dict(dict(embed_dims=16, depth=2, num_heads=2), **kwargs))
