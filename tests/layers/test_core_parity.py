"""The torch-only core's own pieces behave as the library pieces they replace, draw for draw: its
``DropPath`` as timm's, its initialisation as mmengine's ``trunc_normal_init`` / ``constant_init`` /
``normal_init`` (and not as torch's newer ``trunc_normal_``, which draws another stream). Same seed,
same weights, same training run: the toy demo's figures did not move when the core left mmengine."""
import math

import pytest
import torch

from inline_dense.layers.block import DropPath, TransformerBlock
from inline_dense.layers.weight_init import trunc_normal_
from inline_dense.models import InLineCSwin, InLinePVT, InLineSwin

SMALL = dict(depths=(1, 1, 1, 1))


def mmengine_init(model: torch.nn.Module) -> None:
    """What ``init_from_scratch`` called before the split."""
    from mmengine.model.weight_init import constant_init, normal_init, trunc_normal_init
    from mmengine.model.weight_init import trunc_normal_ as mm_trunc_normal_
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            trunc_normal_init(m, std=0.02, bias=0.0)
        elif isinstance(m, torch.nn.LayerNorm):
            constant_init(m, 1.0, bias=0.0)
        elif isinstance(m, torch.nn.Conv2d):
            normal_init(m, 0.0, math.sqrt(2.0 / (m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups)),
                        bias=0.0)
    if isinstance(model, InLinePVT):
        for stage in model.stages:
            mm_trunc_normal_(stage.pos_embed, std=0.02)


@pytest.mark.parametrize('cls', [InLineSwin, InLinePVT, InLineCSwin])
def test_initialisation_draws_as_mmengine_did(cls):
    pytest.importorskip('mmengine')
    model = cls(**SMALL)
    torch.manual_seed(3)
    model.init_from_scratch()
    ours = {k: v.clone() for k, v in model.state_dict().items()}
    after_ours = torch.rand(1)
    torch.manual_seed(3)
    mmengine_init(model)
    assert torch.rand(1) == after_ours  # the generator advanced alike
    assert all(torch.equal(ours[k], v) for k, v in model.state_dict().items())


def test_trunc_normal_is_the_inverse_cdf_method_and_truncates():
    x = torch.empty(20000)
    torch.manual_seed(0)
    trunc_normal_(x, std=0.5, a=-0.6, b=0.6)
    assert x.min() >= -0.6
    assert x.max() <= 0.6
    assert abs(x.mean().item()) < 0.02
    torch.manual_seed(0)
    u = torch.empty(20000).uniform_(2 * 0.5 * (1 + math.erf(-1.2 / math.sqrt(2))) - 1,
                                    2 * 0.5 * (1 + math.erf(1.2 / math.sqrt(2))) - 1)
    torch.testing.assert_close(x, (u.erfinv() * 0.5 * math.sqrt(2)).clamp(-0.6, 0.6))


@pytest.mark.parametrize('p', [0.0, 0.3, 1.0])
def test_drop_path_matches_timm(p):
    timm_layers = pytest.importorskip('timm.layers')
    x = torch.randn(8, 5, 4)
    ours, theirs = DropPath(p).train(), timm_layers.DropPath(p).train()
    torch.manual_seed(1)
    a = ours(x)
    torch.manual_seed(1)
    b = theirs(x)
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert torch.equal(DropPath(p).eval()(x), x)
    assert not list(DropPath(p).parameters())


def test_a_block_with_drop_path_has_the_keys_it_had():
    block = TransformerBlock(8, torch.nn.Identity(), drop_path=0.2)
    assert isinstance(block.drop_path, DropPath)
    assert set(block.state_dict()) == {'norm1.weight', 'norm1.bias', 'norm2.weight', 'norm2.bias', 'mlp.fc1.weight',
                                       'mlp.fc1.bias', 'mlp.fc2.weight', 'mlp.fc2.bias'}
