"""ViTDet's simple feature pyramid: strides, channels, odd sizes, argument checks, and the mmdet neck."""
import math

import pytest
import torch

from inline_dense.layers.simple_pyramid import LayerNorm2d, SimpleFeaturePyramid, pyramid_channels


@pytest.mark.parametrize('hw', [(8, 8), (7, 5), (1, 3), (13, 10)])
def test_strides_and_rounding(hw):
    torch.manual_seed(0)
    h, w = hw
    pyramid = SimpleFeaturePyramid(32, out_channels=16, num_outs=5).eval()
    outs = pyramid(torch.randn(2, 32, h, w))
    assert [tuple(o.shape) for o in outs] == [
        (2, 16, 4 * h, 4 * w), (2, 16, 2 * h, 2 * w), (2, 16, h, w),
        (2, 16, math.ceil(h / 2), math.ceil(w / 2)), (2, 16, math.ceil(h / 4), math.ceil(w / 4))]


def test_stride32_covers_the_last_odd_row():
    """ceil_mode: the last row of an odd map reaches the stride-32 level (a floor would drop it)."""
    pyramid = SimpleFeaturePyramid(8, out_channels=8, num_outs=4).eval()
    x = torch.zeros(1, 8, 5, 4)
    base = pyramid(x)[3]
    x[:, :, 4, :] = 5.0
    assert not torch.allclose(pyramid(x)[3][:, :, 2], base[:, :, 2])


def test_layer_norm_2d_matches_layer_norm_over_channels():
    torch.manual_seed(0)
    norm = LayerNorm2d(6)
    with torch.no_grad():
        norm.weight.uniform_()
        norm.bias.uniform_()
    x = torch.randn(2, 6, 3, 4)
    ref = torch.nn.functional.layer_norm(x.permute(0, 2, 3, 1), (6,), norm.weight, norm.bias, 1e-6).permute(0, 3, 1, 2)
    torch.testing.assert_close(norm(x), ref)


def test_arguments_are_checked():
    assert pyramid_channels(64) == [16, 32, 64, 64]
    with pytest.raises(ValueError, match='multiple of 4'):
        SimpleFeaturePyramid(30)
    with pytest.raises(ValueError, match=r'\[16, 32, 64, 64\]'):
        SimpleFeaturePyramid(64, in_channels=[64, 64, 64, 64])
    with pytest.raises(ValueError, match='num_outs'):
        SimpleFeaturePyramid(64, num_outs=3)
    with pytest.raises(ValueError, match='stride-16 output'):
        SimpleFeaturePyramid(64)(torch.zeros(1, 32, 4, 4))


def test_mmdet_neck_builds_from_config_and_takes_the_last_map():
    pytest.importorskip('mmdet')
    from mmdet.registry import MODELS

    import inline_dense.openmmlab  # noqa: F401  (registers SimpleFPN and LN2d)

    neck = MODELS.build(dict(type='SimpleFPN', backbone_channel=32, in_channels=[8, 16, 32, 32], out_channels=16,
                             num_outs=5, norm_cfg=dict(type='LN2d', requires_grad=True))).eval()
    assert isinstance(neck.lateral_convs[0][1], LayerNorm2d)
    x = torch.randn(1, 32, 6, 9)
    outs = neck((torch.randn(1, 32, 6, 9), x))
    assert isinstance(outs, tuple)
    assert len(outs) == 5
    torch.testing.assert_close(outs[2], neck(x)[2])
    assert tuple(outs[0].shape) == (1, 16, 24, 36)
