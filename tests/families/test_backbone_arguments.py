"""Backbone settings are checked for type and range before anything is built: a value
that means nothing, or would be taken for something else (``out_norm='no'`` is truthy,
``frozen_stages=True`` is 1, ``out_indices=(3, 1)`` was reordered), fails with one line naming the
setting and the fix. The checks live in ``inline_dense.layers.arch`` and serve every family."""
import re
from typing import Any

import pytest
import torch

from inline_dense.layers.arch import OPTION_KINDS, check_backbone_options
from inline_dense.models import InLineCSwin, InLinePVT, InLineSwin

SMALL: dict[type[torch.nn.Module], dict[str, Any]] = {
    InLineSwin: dict(embed_dims=8, depths=(1, 1, 1, 1), num_heads=(1, 1, 2, 2), attn_type='IIIS', window_size=2),
    InLinePVT: dict(embed_dims=(8, 8, 16, 16), depths=(1, 1, 1, 1), num_heads=(1, 1, 2, 2), attn_type='IIIS'),
    InLineCSwin: dict(embed_dims=8, depths=(1, 1, 1, 1), num_heads=(1, 1, 2, 2), split_size=(1, 1, 1, 1)),
}
FAMILIES = list(SMALL)


def refused(cls: type[torch.nn.Module], *fragments: str, **overrides: Any) -> str:
    """The one-line message of building ``cls`` with ``overrides``, holding every fragment."""
    with pytest.raises((TypeError, ValueError)) as info:
        cls(**dict(SMALL[cls], **overrides))
    text = str(info.value)
    assert '\n' not in text, text
    assert text.startswith(cls.__name__ + ':'), text
    for fragment in fragments:
        assert fragment in text, (fragment, text)
    return text


@pytest.mark.parametrize('cls', FAMILIES)
def test_the_small_settings_build(cls):
    outs = cls(**SMALL[cls])(torch.zeros(1, 3, 33, 47))
    assert [o.shape[-2:] for o in outs] == [(9, 12), (5, 6), (3, 3), (2, 2)]


@pytest.mark.parametrize('cls', FAMILIES)
@pytest.mark.parametrize('key', ['out_norm', 'with_cp', 'qkv_bias'])
@pytest.mark.parametrize('value', ['no', 'False', 1, 0, None])
def test_booleans_must_be_bools(cls, key, value):
    refused(cls, f'{key}={value!r}', 'True or False (a bool)', **{key: value})


@pytest.mark.parametrize('cls', FAMILIES)
@pytest.mark.parametrize('depths', [(0, 0, 0, 0), (1, 0, 1, 1), (1, -1, 1, 1), -1, 2, (1.0, 1, 1, 1)])
def test_depths_are_positive_ints_per_stage(cls, depths):
    refused(cls, f'depths={depths!r}', 'a tuple of positive ints, one per stage', 'e.g. depths=', depths=depths)


@pytest.mark.parametrize('sr_ratios', [(0, 4, 2, 1), (8, 4, 2, -1), (8, 4, 2.5, 1)])
def test_pvt_sr_ratios_are_positive_ints(sr_ratios):
    refused(InLinePVT, f'sr_ratios={sr_ratios!r}', '(1: no reduction)', sr_ratios=sr_ratios)


@pytest.mark.parametrize('cls', [InLineSwin, InLineCSwin])
@pytest.mark.parametrize('mlp_ratio', [0, -4.0, '4', float('nan')])
def test_mlp_ratio_is_a_positive_number(cls, mlp_ratio):
    refused(cls, 'mlp_ratio=', 'must be a positive number', mlp_ratio=mlp_ratio)


def test_pvt_mlp_ratios_are_positive_numbers():
    refused(InLinePVT, 'mlp_ratios=(0, 8, 4, 4)', 'positive numbers, one per stage', mlp_ratios=(0, 8, 4, 4))


@pytest.mark.parametrize('cls', FAMILIES)
@pytest.mark.parametrize('out_indices', [(3, 1), (1, 1), (0, 2, 1)])
def test_out_indices_unsorted_or_repeated_are_refused_not_reordered(cls, out_indices):
    fixed = tuple(sorted(set(out_indices)))
    refused(cls, 'increasing without repeats', f'out_indices={fixed}', out_indices=out_indices)


@pytest.mark.parametrize('cls', FAMILIES)
def test_out_indices_as_one_int_gets_the_tuple_hint(cls):
    refused(cls, 'out_indices=3 is one int', 'out_indices=(3,)', out_indices=3)


@pytest.mark.parametrize('cls', FAMILIES)
@pytest.mark.parametrize('out_indices', [(True, 2), ('1', '2'), (1.0,)])
def test_out_indices_hold_ints(cls, out_indices):
    refused(cls, 'must be a tuple of stage numbers (ints)', out_indices=out_indices)


@pytest.mark.parametrize('cls', FAMILIES)
@pytest.mark.parametrize('frozen_stages', [True, False, 1.0, '1'])
def test_frozen_stages_is_an_int_not_a_bool(cls, frozen_stages):
    refused(cls, f'frozen_stages={frozen_stages!r}', 'must be an int', frozen_stages=frozen_stages)


@pytest.mark.parametrize('window_size', [4.5, 0, '7', True])
def test_swin_window_size_is_a_positive_int(window_size):
    refused(InLineSwin, f'window_size={window_size!r}', 'a positive int', window_size=window_size)


@pytest.mark.parametrize('cls', FAMILIES)
@pytest.mark.parametrize('embed_dims', [0, '32', -8, 8.0])
def test_embed_dims_is_a_positive_int(cls, embed_dims):
    refused(cls, f'embed_dims={embed_dims!r}', 'a positive int or one per stage', embed_dims=embed_dims)


@pytest.mark.parametrize('size', [0, 13, 100, (224, 13), -32])
def test_pvt_pretrain_img_size_is_a_positive_multiple_of_the_total_stride(size):
    refused(InLinePVT, 'pretrain_img_size=', 'positive multiples of 32', 'product of patch_sizes (4, 2, 2, 2)',
            pretrain_img_size=size)


def test_pvt_pretrain_img_size_follows_the_patch_sizes():
    assert InLinePVT(**dict(SMALL[InLinePVT], pretrain_img_size=48, patch_sizes=(4, 2, 2, 1))).strides[-1] == 16
    refused(InLinePVT, 'positive multiples of 16', pretrain_img_size=40, patch_sizes=(4, 2, 2, 1))


@pytest.mark.parametrize('patch_sizes', [(0, 2, 2, 2), (4, 2, -2, 2), (4, 2, 2, 1.5)])
def test_pvt_patch_sizes_are_positive_ints(patch_sizes):
    refused(InLinePVT, f'patch_sizes={patch_sizes!r}', 'positive ints, one per stage', patch_sizes=patch_sizes)


@pytest.mark.parametrize('split_size', [1.5, 0, (1, 2, 1.5, 7), '7'])
def test_cswin_split_size_is_positive_ints(split_size):
    refused(InLineCSwin, f'split_size={split_size!r}', 'a positive int or one per stage', split_size=split_size)


@pytest.mark.parametrize('cls', FAMILIES)
@pytest.mark.parametrize('key', ['drop_path_rate', 'drop_rate', 'attn_drop_rate'])
@pytest.mark.parametrize('value', ['0.1', None, True, 1.0, -0.1])
def test_rates_are_numbers_in_0_1(cls, key, value):
    refused(cls, f'{key}={value!r}', 'must be in [0, 1) (a number', **{key: value})


@pytest.mark.parametrize('cls', FAMILIES)
def test_in_channels_is_a_positive_int(cls):
    refused(cls, 'in_channels=0', 'a positive int', in_channels=0)


def test_every_kind_gives_an_example_that_passes_its_own_check():
    for key, (check, _, example) in OPTION_KINDS.items():
        assert check(eval(example)), key  # the message's e.g. value must be a good one
    check_backbone_options({k: eval(e) for k, (_, _, e) in OPTION_KINDS.items()}, 'X')


def test_an_arch_override_left_at_none_takes_the_preset():
    assert InLineSwin(embed_dims=None, depths=(1, 1, 1, 1), window_size=2).embed_dims == (96, 192, 384, 768)
    check_backbone_options(dict(unknown_key='anything'), 'X')
    message = "X: with_cp='yes' must be True or False (a bool), e.g. with_cp=False."
    with pytest.raises(TypeError, match=re.escape(message)):
        check_backbone_options(dict(with_cp='yes'), 'X')
