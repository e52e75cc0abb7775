"""ViTDet's layer-wise lr decay (LayerDecayOptimWrapperConstructor): the groups, lrs and weight decays
of a tiny InLine-DeiT detector-like model, and the one-line errors."""
import pytest
from mmengine.optim import build_optim_wrapper
from torch import nn

import inline_dense.openmmlab  # noqa: F401  (registers the constructor and the backbones)
from inline_dense.models import InLineDeiT
from inline_dense.openmmlab.necks import SimpleFPN

LR, WD, RATE, DEPTH = 1e-3, 0.1, 0.5, 3


class Detector(nn.Module):
    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.neck = SimpleFPN(16, [4, 8, 16, 16], 8, 5)
        self.head = nn.Linear(8, 2)


def optim_cfg(**paramwise):
    return dict(optimizer=dict(type='AdamW', lr=LR, weight_decay=WD),
                constructor='LayerDecayOptimWrapperConstructor', paramwise_cfg=paramwise)


def settings_by_name(model, optimizer):
    by_id = {id(p): (g['lr'], g['weight_decay']) for g in optimizer.param_groups for p in g['params']}
    return {n: by_id[id(p)] for n, p in model.named_parameters()}


def test_groups_lrs_and_weight_decay():
    model = Detector(InLineDeiT(dict(embed_dims=16, depth=DEPTH, num_heads=2, pretrain_img_size=64),
                                out_indices=(DEPTH - 1,)))
    optimizer = build_optim_wrapper(model, optim_cfg(decay_rate=RATE)).optimizer
    got = settings_by_name(model, optimizer)
    assert len(got) == len(list(model.parameters()))
    # the stem at decay ** (L + 1), block i at decay ** (L - i), neck and head at 1
    assert got['backbone.patch_embed.proj.weight'] == pytest.approx((LR * RATE ** (DEPTH + 1), WD))
    assert got['backbone.patch_embed.pos_embed'] == pytest.approx((LR * RATE ** (DEPTH + 1), 0.0))
    assert got['backbone.patch_embed.cls_token'] == pytest.approx((LR * RATE ** (DEPTH + 1), 0.0))
    for i in range(DEPTH):
        assert got[f'backbone.stages.{i}.blocks.0.attn.qkv.weight'] == pytest.approx((LR * RATE ** (DEPTH - i), WD))
        assert got[f'backbone.stages.{i}.blocks.0.attn.qkv.bias'] == pytest.approx((LR * RATE ** (DEPTH - i), 0.0))
        assert got[f'backbone.stages.{i}.blocks.0.norm1.weight'] == pytest.approx((LR * RATE ** (DEPTH - i), 0.0))
    assert got[f'backbone.out_norms.{DEPTH - 1}.weight'] == pytest.approx((LR, 0.0))
    assert got['neck.lateral_convs.0.0.weight'] == pytest.approx((LR, WD))
    assert got['neck.lateral_convs.0.1.weight'] == pytest.approx((LR, 0.0))  # LN2d
    assert got['head.weight'] == pytest.approx((LR, WD))
    assert got['head.bias'] == pytest.approx((LR, 0.0))
    # one group per (layer id, decayed or not): stem, 3 blocks, the rest; each both ways
    assert len(optimizer.param_groups) == 2 * (DEPTH + 2)


@pytest.mark.parametrize(('paramwise', 'match'), [
    (dict(decay_rate=1.5), r'decay_rate=\.\.\.\) must be a number in \(0, 1\]'),
    (dict(), 'must be a number'),
    (dict(decay_rate=0.7, custom_keys={}), "remove \\['custom_keys'\\]"),
])
def test_wrong_settings_in_one_line(paramwise, match):
    with pytest.raises(ValueError, match=match) as err:
        build_optim_wrapper(Detector(InLineDeiT(dict(embed_dims=16, depth=1, num_heads=2, pretrain_img_size=32))),
                            optim_cfg(**paramwise))
    assert '\n' not in str(err.value)


def test_backbone_without_blocks_is_refused():
    model = Detector(nn.Conv2d(3, 16, 3))
    with pytest.raises(ValueError, match=r"not a plain ViT.*type='InLineDeiT'"):
        build_optim_wrapper(model, optim_cfg(decay_rate=0.7))
    with pytest.raises(ValueError, match=r'has no .backbone'):
        build_optim_wrapper(nn.Linear(2, 2), optim_cfg(decay_rate=0.7))


@pytest.mark.parametrize('depths', [(1, 1, 1, 1), (2, 2, 6, 2)])
def test_a_pyramid_is_refused_whatever_its_depths(depths):
    """The toy InLine-Swin has one block per stage, so it looks like a list of blocks; the registry's
    ``plain`` decides, not the structure."""
    from inline_dense.openmmlab import InLineSwin
    model = Detector(InLineSwin(embed_dims=16, depths=depths, num_heads=(1, 2, 4, 8), window_size=4))
    with pytest.raises(ValueError, match=r"InLineSwin is not a plain ViT \(the registry's plain families: "
                                         r"type='InLineDeiT'\)") as err:
        build_optim_wrapper(model, optim_cfg(decay_rate=0.7))
    assert '\n' not in str(err.value)


def test_the_plain_families_come_from_the_registry(monkeypatch):
    """A plain family is taken by its spec, with no look at its structure; and only by it."""
    from inline_dense import registry
    from inline_dense.openmmlab import InLineDeiT as RegisteredDeiT
    from inline_dense.openmmlab.engine import layer_decay
    model = Detector(RegisteredDeiT(dict(embed_dims=16, depth=2, num_heads=2, pretrain_img_size=32)))
    assert len(build_optim_wrapper(model, optim_cfg(decay_rate=RATE)).optimizer.param_groups) == 2 * (2 + 2)
    deit = registry.FAMILIES['deit']
    monkeypatch.setattr(type(deit), 'plain', property(lambda spec: False))
    monkeypatch.setattr(layer_decay, 'PLAIN_TYPES', '')
    with pytest.raises(ValueError, match='InLineDeiT is not a plain ViT'):
        build_optim_wrapper(model, optim_cfg(decay_rate=RATE))


def test_lrs_follow_the_scheduler_in_proportion():
    from mmengine.optim import LinearLR
    model = Detector(InLineDeiT(dict(embed_dims=16, depth=2, num_heads=2, pretrain_img_size=32)))
    wrapper = build_optim_wrapper(model, optim_cfg(decay_rate=RATE))
    LinearLR(wrapper.optimizer, start_factor=0.1, by_epoch=False, begin=0, end=10)
    ratios = [g['lr'] / (LR * g['lr_scale']) for g in wrapper.optimizer.param_groups]
    assert ratios == pytest.approx([0.1] * len(ratios))
