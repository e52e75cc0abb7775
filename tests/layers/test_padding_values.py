"""Padding independence for any padding value: an image alone and in a batch padded with noise
(or 114, a common ``pad_value``) gives the same features, for every family of the registry, at
sizes that are not multiples of the patch size (odd ones included).

The backbone zeroes the input outside ``valid_hw`` and every token map before a convolution, so
what lies in the padding is never read (``padding.zero_outside_valid``)."""
import math
from collections.abc import Sequence

import pytest
import torch

from helpers import TINY_KINDS, build_tiny
from inline_dense.layers import padding

TOL = 1e-4
SIZES = ((37, 45), (50, 71), (33, 97), (64, 30))  # no multiple of 4 but one side; odd sides
MATE = (97, 130)


def noise_batch(images: Sequence[torch.Tensor], fill: str, seed: int = 5) -> tuple[torch.Tensor, list[tuple[int, int]]]:
    """The images padded bottom/right to one batch, the padding ``fill``: 'noise' (large Gaussian)
    or a number."""
    h = max(im.shape[-2] for im in images)
    w = max(im.shape[-1] for im in images)
    g = torch.Generator().manual_seed(seed)
    if fill == 'noise':
        batch = torch.randn(len(images), 3, h, w, generator=g) * 50
    else:
        batch = torch.full((len(images), 3, h, w), float(fill))
    for i, im in enumerate(images):
        batch[i, :, :im.shape[-2], :im.shape[-1]] = im
    return batch, [tuple(im.shape[-2:]) for im in images]


def valid_error(model, a, b, hw, index_b: int) -> float:
    """Max |a - b| over each output's tokens that cover the image's real pixels (all outputs)."""
    strides = [model.strides[i] for i in model.out_indices]
    errs = []
    for fa, fb, s in zip(a, b, strides):
        h, w = math.ceil(hw[0] / s), math.ceil(hw[1] / s)
        errs.append((fa[0, :, :h, :w] - fb[index_b, :, :h, :w]).abs().max().item())
    return max(errs)


@pytest.fixture(scope='module')
def images():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(3, h, w, generator=g) for h, w in SIZES], torch.randn(3, *MATE, generator=g)


@pytest.mark.parametrize('fill', ['noise', 114])
@pytest.mark.parametrize('kind', TINY_KINDS)
def test_alone_equals_batched_for_any_padding_value(kind, fill, images):
    torch.manual_seed(0)
    model = build_tiny(kind, drop_path_rate=0.0).eval()
    small, mate = images
    worst = 0.0
    with torch.no_grad():
        mate_alone = model(mate[None])
        for img in small:
            alone = model(img[None])
            x, sizes = noise_batch([mate, img], fill)
            batched = model(x, sizes)
            worst = max(worst, valid_error(model, alone, batched, img.shape[-2:], 1))
            assert valid_error(model, mate_alone, batched, MATE, 0) < TOL
            # the image first, the batch-mate second: the same
            x, sizes = noise_batch([img, mate], fill, seed=6)
            worst = max(worst, valid_error(model, alone, model(x, sizes), img.shape[-2:], 0))
    print(f'\n{kind} padded with {fill}: max |alone - batched| {worst:.2e}')
    assert worst < TOL, f'{kind}, padding {fill}: alone vs batched differ by {worst:.3g}'


@pytest.mark.parametrize('kind', TINY_KINDS)
def test_the_input_zeroing_is_what_makes_them_agree(kind, images, monkeypatch):
    """Without zeroing the input outside ``valid_hw`` the noise leaks in: the check has teeth."""
    torch.manual_seed(0)
    model = build_tiny(kind, drop_path_rate=0.0).eval()
    small, mate = images
    monkeypatch.setattr(padding, 'zero_outside_valid', lambda x, valid_hw: x)
    with torch.no_grad():
        img = small[0]
        x, sizes = noise_batch([mate, img], 'noise')
        err = valid_error(model, model(img[None]), model(x, sizes), img.shape[-2:], 1)
    assert err > 1e-2


def test_zero_outside_valid():
    x = torch.full((2, 3, 5, 6), float('nan'))
    x[0, :, :3, :4] = 1.0
    x[1] = 2.0
    out = padding.zero_outside_valid(x, [(3, 4), (5, 6)])
    assert torch.equal(out[0, :, :3, :4], torch.ones(3, 3, 4))
    assert out[0, :, 3:].eq(0).all()
    assert out[0, :, :, 4:].eq(0).all()  # NaN padding too
    assert torch.equal(out[1], torch.full((3, 5, 6), 2.0))
    y = torch.randn(2, 3, 5, 6)
    assert padding.zero_outside_valid(y, None) is y
    assert padding.zero_outside_valid(y, [(5, 6), (5, 6)]) is y  # nothing padded: the same tensor
