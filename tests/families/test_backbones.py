"""Shapes, linear cost, gradients, freezing, checkpointing and registration of the backbones."""
import math
from typing import ClassVar

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.autograd.graph import saved_tensors_hooks
from torch.func import functional_call
from torch.utils.flop_counter import FlopCounterMode

from helpers import module_chains
from inline_dense.layers.backbone import InLineBackboneBase
from inline_dense.layers.settings import resolve_settings
from inline_dense.models import InLineAttention, InLineCSwin, InLinePVT, InLineSwin

INPUTS = [(64, 64), (96, 160), (112, 137)]  # square, non-square, odd sizes


def expected_shapes(h, w, dims):
    shapes, sh, sw = [], math.ceil(h / 4), math.ceil(w / 4)
    for d in dims:
        shapes.append((1, d, sh, sw))
        sh, sw = math.ceil(sh / 2), math.ceil(sw / 2)
    return shapes


ARCH_DIMS = [
    (InLineSwin, 'tiny', [96, 192, 384, 768]), (InLineSwin, 'small', [96, 192, 384, 768]),
    (InLineSwin, 'base', [128, 256, 512, 1024]),
    (InLineCSwin, 'tiny', [64, 128, 256, 512]), (InLineCSwin, 'small', [64, 128, 256, 512]),
    (InLineCSwin, 'base', [96, 192, 384, 768]),
] + [(InLinePVT, arch, [64, 128, 320, 512]) for arch in ('tiny', 'small', 'medium', 'large')]


def shapes_without_compute(model: torch.nn.Module, h: int, w: int) -> list:
    """Output shapes of ``model`` (built on the meta device) for a (1, 3, h, w) input, run on fake
    tensors: every shape is worked out, no memory is filled and no product is computed."""
    with FakeTensorMode():
        tensors = {n: torch.empty(t.shape, dtype=t.dtype) for n, t in [*model.named_parameters(),
                                                                        *model.named_buffers()]}
        with torch.no_grad():
            outs = functional_call(model, tensors, (torch.empty(1, 3, h, w),))
        return [tuple(o.shape) for o in outs]


@pytest.mark.core
@pytest.mark.parametrize(('cls', 'arch', 'dims'), ARCH_DIMS, ids=[f'{c.__name__}-{a}' for c, a, _ in ARCH_DIMS])
def test_arch_shapes(cls, arch, dims):
    """Every preset on square, non-square and odd inputs: ceil(H / stride) x ceil(W / stride).
    The full-size presets on fake tensors; the tiny ones also really, with finite outputs."""
    with torch.device('meta'):
        model = cls(arch=arch).eval()
    for h, w in INPUTS:
        assert shapes_without_compute(model, h, w) == expected_shapes(h, w, dims)
    if arch == 'tiny':
        model = cls(arch=arch).eval()
        for h, w in INPUTS:
            with torch.no_grad():
                outs = model(torch.randn(1, 3, h, w))
            assert [tuple(o.shape) for o in outs] == expected_shapes(h, w, dims)
            assert all(torch.isfinite(o).all() for o in outs)


def test_cswin_block_layout():
    model = InLineCSwin(arch='tiny')  # attn_type 'IISS': one letter per stage, every block of a stage alike
    assert [len(s.blocks) for s in model.stages] == [len(kinds) for kinds in model.attn_kinds]
    assert [set(kinds) for kinds in model.attn_kinds] == [{'I'}, {'I'}, {'S'}, {'S'}]
    inline = model.stages[0].blocks[0]
    assert isinstance(inline.attn, InLineAttention)
    assert inline.attn.get_v is not None
    assert inline.residual_from_input
    stripes, last = model.stages[2].blocks[0].attn, model.stages[3].blocks[0].attn
    assert (stripes.num_branches, stripes.split_size, last.num_branches) == (2, 7, 1)
    assert stripes.stripes() == [(None, 7), (7, None)]
    assert last.stripes() == [(None, None)]


def test_arch_presets_and_overrides():
    swin = InLineSwin(arch='base')
    assert [len(s.blocks) for s in swin.stages] == [2, 2, 18, 2]
    # 'IIMS2': stage 2 has 2 InLine blocks, then softmax ones
    assert swin.attn_kinds[2][:3] == ['I', 'I', 'S']
    assert swin.attn_kinds[3] == ['S', 'S']
    assert isinstance(swin.stages[0].blocks[0].attn, InLineAttention)
    assert InLineSwin(arch='tiny').attn_kinds == [['I'] * 2, ['I'] * 2, ['I'] * 6, ['S'] * 2]
    assert InLineSwin(arch='small').attn_kinds[2] == ['S'] * 18
    custom = InLineSwin(arch='tiny', embed_dims=32, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8),
                        attn_type='SIII', out_indices=(1, 3))
    outs = custom(torch.randn(2, 3, 64, 96))
    assert [tuple(o.shape) for o in outs] == [(2, 64, 8, 12), (2, 256, 2, 3)]
    pvt = InLinePVT(arch='small', attn_type='IISS')
    assert [len(s.blocks) for s in pvt.stages] == [3, 4, 6, 3]
    assert type(pvt.stages[2].blocks[0].attn).__name__ == 'SRAttention'
    assert pvt.stages[2].blocks[0].attn.sr_ratio == 2


def test_inline_blocks_are_global_at_any_resolution():
    """A change at one corner reaches the opposite corner within one InLine layer."""
    attn = InLineAttention(32, 2).eval()
    x = torch.randn(1, 30 * 50, 32)
    y = x.clone()
    y[0, 0] += 1.0
    with torch.no_grad():
        d = (attn(x, (30, 50)) - attn(y, (30, 50))).abs()
    assert d[0, -1].max() > 1e-6


@pytest.mark.parametrize('kernel', ['identity', 'relu', 'leakyrelu', 'exp'])
def test_kernels_run(kernel):
    attn = InLineAttention(16, 2, kernel=kernel)
    out = attn(torch.randn(2, 12, 16) * 0.5, (3, 4))
    assert out.shape == (2, 12, 16)
    assert torch.isfinite(out).all()


def attention_costs(module, hw, channels):
    """(FLOPs, bytes saved for backward) of one forward at an hw grid."""
    x = torch.randn(1, hw[0] * hw[1], channels, requires_grad=True)
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with FlopCounterMode(display=False) as counter, saved_tensors_hooks(pack, lambda t: t):
        module(x, hw)
    return counter.get_total_flops(), sum(saved)


class GlobalSoftmax(torch.nn.Module):
    """Quadratic reference, to show the linearity check can fail."""

    def __init__(self, c):
        super().__init__()
        self.qkv = torch.nn.Linear(c, 3 * c)

    def forward(self, x, hw):
        q, k, v = self.qkv(x).chunk(3, -1)
        return torch.softmax(q @ k.transpose(1, 2), -1) @ v


def test_inline_attention_cost_is_linear_in_tokens():
    attn = InLineAttention(48, 3)
    f1, m1 = attention_costs(attn, (32, 48), 48)
    f4, m4 = attention_costs(attn, (64, 96), 48)
    assert 3.8 < f4 / f1 < 4.2, f4 / f1
    assert 3.7 < m4 / m1 < 4.2, m4 / m1  # below 4 by the weights saved at both sizes
    s1, sm1 = attention_costs(GlobalSoftmax(48), (16, 24), 48)
    s4, sm4 = attention_costs(GlobalSoftmax(48), (32, 48), 48)
    assert s4 / s1 > 8
    assert sm4 / sm1 > 8


def test_gradients_reach_every_parameter(kind, tiny_backbone):
    model = tiny_backbone(kind, drop_path_rate=0.0)
    outs = model(torch.randn(2, 3, 64, 80))
    sum(o.square().mean() for o in outs).backward()
    no_grad = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert no_grad == []


@pytest.mark.parametrize('frozen', [0, 1, 2, 4])
def test_frozen_stages_have_no_trainable_parameters(kind, frozen, tiny_backbone):
    model = tiny_backbone(kind, frozen_stages=frozen)
    model.train()
    frozen_mods = list(model.stages[:frozen]) + [norm for i, norm in model.out_norms.items() if int(i) < frozen]
    frozen_mods += model.stem_modules()
    for mod in frozen_mods:
        assert not any(p.requires_grad for p in mod.parameters())
        assert not mod.training
    later = list(model.stages[frozen:])
    assert all(p.requires_grad for m in later for p in m.parameters())


def test_frozen_stages_outputs_do_not_change_in_train_mode(kind, tiny_backbone):
    """Dropout after the patch embedding (Swin) is frozen with it, as in mmdet's Swin."""
    model = tiny_backbone(kind, frozen_stages=1, drop_rate=0.5, drop_path_rate=0.0, out_indices=(0,)).train()
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        first, second = model(x)[0], model(x)[0]
    torch.testing.assert_close(first, second)


def test_with_cp_gives_same_outputs_and_gradients(kind, tiny_backbone):
    torch.manual_seed(0)
    plain = tiny_backbone(kind, drop_path_rate=0.0)
    cp = tiny_backbone(kind, drop_path_rate=0.0, with_cp=True)
    cp.load_state_dict(plain.state_dict())
    x = torch.randn(1, 3, 64, 72)
    grads = []
    for model in (plain, cp):
        outs = model(x)
        sum(o.sum() for o in outs).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters()})
        with torch.no_grad():
            grads[-1]['outs'] = torch.cat([o.flatten() for o in model(x)])
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(('kwargs', 'words'), [
    (dict(arch='huge'), ["unknown arch 'huge'", 'tiny']),
    (dict(attn_type='IIS'), ['too short']),
    (dict(attn_type='IIXS'), ["unknown letter(s) ['X']"]),
    (dict(attn_type='IIMS9'), ['from 1 to 5']),
    (dict(kernel='softplus'), ["unknown kernel 'softplus'", 'identity']),
])
def test_bad_settings_raise_clear_errors(kwargs, words):
    with pytest.raises(ValueError) as info:  # noqa: PT011 (each of several words checked below)
        InLineSwin(**kwargs)
    for word in words:
        assert word in str(info.value)


def test_registered_in_mmdet_and_mmseg():
    pytest.importorskip('mmdet')
    pytest.importorskip('mmseg')
    from mmdet.registry import MODELS as DET
    from mmseg.registry import MODELS as SEG

    import inline_dense.openmmlab as adapter
    for registry in (DET, SEG):  # the adapter's classes, subclasses of the core's
        assert registry.get('InLineSwin') is adapter.InLineSwin
        assert registry.get('InLinePVT') is adapter.InLinePVT
        assert registry.get('InLineCSwin') is adapter.InLineCSwin
        assert all(issubclass(registry.get(c.__name__), c) for c in (InLineSwin, InLinePVT, InLineCSwin))
    model = DET.build(dict(type='InLinePVT', arch='tiny', depths=(1, 1, 1, 1)))
    assert isinstance(model, InLinePVT)
    model = SEG.build(dict(type='InLineSwin', arch='tiny', depths=(1, 1, 1, 1), attn_type='IIIS'))
    assert isinstance(model, InLineSwin)
    model = DET.build(dict(type='InLineCSwin', arch='tiny', depths=(1, 1, 1, 1)))
    assert isinstance(model, InLineCSwin)


def test_openmmlab_backbone_gives_contiguous_maps_as_mmdet_backbones_do(kind, tiny_backbone):
    """The core returns channels-last views of its tokens; the OpenMMLab class gives the same values as
    contiguous (B, C, H, W) maps, so that a head joining levels with maps of its own (UperNet's ``cat``)
    meets one memory layout."""
    pytest.importorskip('mmengine')
    from inline_dense.openmmlab.backbones import OpenMMLabBackbone
    model = tiny_backbone(kind).eval()
    x = torch.randn(1, 3, 64, 96)
    with torch.no_grad():
        outs = model(x)
        core_outs = super(OpenMMLabBackbone, model).forward(x)  # the core family's forward
    assert isinstance(outs, tuple)
    assert len(outs) == len(core_outs)
    assert any(not o.is_contiguous() for o in core_outs)  # else this test checks nothing
    for out, core_out in zip(outs, core_outs):
        assert out.is_contiguous()
        torch.testing.assert_close(out, core_out, rtol=0, atol=0)


class OneStage(InLineBackboneBase):
    """The least a family writes: a preset, its settings resolved, its stem and stages handed to the base."""

    arch_zoo: ClassVar[dict] = {'one': dict(embed_dims=8, depths=(1,), num_heads=(1,))}

    def __init__(self, strides=(4,), frozen_stages=-1, num_stages=1):
        settings = resolve_settings('OneStage', self.arch_zoo, 'one', {}, in_channels=3, kernel='identity',
                                    attn_impl='auto', out_indices=(0,), out_norm=True, frozen_stages=frozen_stages,
                                    drop_path_rate=0.0)
        stages = []
        for _ in range(num_stages):
            stage = torch.nn.Module()
            stage.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8)])
            stages.append(stage)
        super().__init__(settings, dict(stem=torch.nn.Conv2d(3, 8, 4, 4)), stages, strides)


def test_base_class_sets_strides_and_freezes():
    model = OneStage(frozen_stages=1)
    assert model.strides == (4,)
    assert model.min_input_size == 4
    assert model.stem_modules() == [model.stem]
    assert not any(p.requires_grad for p in model.stem.parameters())
    assert not any(p.requires_grad for p in model.stages[0].parameters())  # the family never called _freeze
    assert not any(p.requires_grad for p in model.out_norms['0'].parameters())
    assert [name for name, _ in model.named_children()] == ['out_norms', 'stem', 'stages', 'taps']


def test_base_class_refuses_other_than_one_stride_and_one_stage_per_stage():
    with pytest.raises(TypeError, match=r'OneStage must hand InLineBackboneBase 1 stages and 1 strides .* '
                                        r'it gave 1 stages and the strides \(\)'):
        OneStage(strides=())
    with pytest.raises(TypeError, match=r'it gave 2 stages'):
        OneStage(num_stages=2)


@pytest.mark.parametrize('family', [
    lambda: InLineSwin('tiny', depths=(1, 1, 2, 1), attn_type='IIMS1'),
    lambda: InLinePVT('tiny', depths=(1, 1, 1, 1), attn_type='ISIS'),
    lambda: InLineCSwin('tiny', depths=(1, 1, 2, 1), frozen_stages=1)], ids=['swin', 'pvt', 'cswin'])
def test_construction_goes_one_way(family):
    """No module of inline_dense is entered twice on one call stack while a family is built:
    family model -> layers.settings -> arch / tensor_utils; model -> layers.block / its attention ->
    weight_init; model -> layers.backbone -> weight_init. Each returns; none calls back up (no build()
    hook, no closure, no init override)."""
    chains = module_chains(family, 'inline_dense')
    assert any(chain[:2] == ('model', 'settings') for chain in chains)
    assert any(chain[:3] == ('model', 'backbone', 'weight_init') for chain in chains)
    assert [chain for chain in chains if len(set(chain)) != len(chain)] == []


def test_init_cfg_initialisers_run_and_init_cfg_stays(tiny_backbone):
    init_cfg = [dict(type='Constant', layer='Linear', val=0.5, bias=0.25)]
    model = tiny_backbone('pvt', init=False, init_cfg=init_cfg)
    model.init_weights()
    assert model.init_cfg == init_cfg
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears
    assert all(bool((m.weight == 0.5).all()) for m in linears)
    assert all(bool((m.bias == 0.25).all()) for m in linears if m.bias is not None)
