"""timm feature models (``features_only=True``) offer ``set_grad_checkpointing`` as timm's own do, and
``prune_intermediate_layers`` leaves a model as timm's Swin leaves itself: no head, no pooling, the
unpooled map of the last kept stage from ``forward``."""
import pytest
import timm
import torch

import inline_dense.timm  # noqa: F401  (registers the models)
from helpers import PYRAMIDS, SHALLOW, SMALLEST, TOKEN_HEADS
from inline_dense.layers.block import TransformerBlock

SMALL = tuple(SMALLEST.values())


def small(variant, **kwargs):
    torch.manual_seed(0)
    return timm.create_model(variant, drop_path_rate=0.0, **SHALLOW[variant], **kwargs)


def timm_swin(**kwargs):
    """timm's own Swin, small: the reference for what timm's models do."""
    torch.manual_seed(0)
    return timm.create_model('swin_tiny_patch4_window7_224', pretrained=False, embed_dim=16, depths=(1, 1, 1, 1),
                             num_heads=(1, 2, 4, 8), img_size=(64, 96), window_size=4, **kwargs)


@pytest.mark.parametrize('variant', SMALL)
def test_feature_model_grad_checkpointing(variant):
    model = small(variant, features_only=True, out_indices=(1, 3)).train()
    reference = timm_swin(features_only=True, out_indices=(1, 3))
    reference.set_grad_checkpointing()  # timm's own feature models have it
    x = torch.randn(2, 3, 45, 61, generator=torch.Generator().manual_seed(1))
    calls = []
    block = next(m for m in model.modules() if isinstance(m, TransformerBlock))
    block.norm1.register_forward_hook(lambda *args: calls.append(1))  # recomputed when checkpointed
    results = []
    for enable in (False, True):
        model.set_grad_checkpointing(enable)
        model.zero_grad()
        calls.clear()
        outs = model(x)
        sum(o.square().mean() for o in outs).backward()
        results.append(([o.detach() for o in outs], {n: p.grad.clone() for n, p in model.named_parameters()},
                        len(calls)))
    (plain, plain_grads, plain_calls), (cp, cp_grads, cp_calls) = results
    assert plain_calls == 1
    assert cp_calls == 2  # checkpointed: the block ran again in backward
    assert all(torch.equal(a, b) for a, b in zip(plain, cp))
    for name, grad in plain_grads.items():
        torch.testing.assert_close(cp_grads[name], grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('prune_head', [True, False])
@pytest.mark.parametrize('variant', PYRAMIDS)
def test_prune_intermediate_layers_as_timm_swin(variant, prune_head):
    x = torch.randn(1, 3, 64, 96)
    for indices in ([0, 1, 2, 3], [1, 2]):
        ours, theirs = small(variant, num_classes=7).eval(), timm_swin(num_classes=7).eval()
        kept = ours.prune_intermediate_layers(indices, prune_head=prune_head)
        assert kept == theirs.prune_intermediate_layers(indices, prune_head=prune_head)
        with torch.no_grad():
            out, ref = ours(x), theirs(x)
        if prune_head or indices[-1] < 3:  # timm: no head, no pooling: the unpooled map
            assert (ours.num_classes, ours.global_pool) == (theirs.num_classes, theirs.global_pool) == (0, '')
            assert out.ndim == ref.ndim == 4  # ours NCHW, timm's Swin NHWC
            stage = indices[-1]
            assert out.shape[1] == ours.num_features == ours.feature_info[stage]['num_chs']
            stride = ours.feature_info[stage]['reduction']
            assert out.shape[2:] == (64 // stride, 96 // stride)
            assert ref.shape[1:3] == out.shape[2:]
        else:  # the whole model kept with its head: logits
            assert out.shape == ref.shape == (1, 7)


@pytest.mark.parametrize('prune_head', [True, False])
@pytest.mark.parametrize('variant', TOKEN_HEADS)
def test_prune_intermediate_layers_as_timm_vit(variant, prune_head):
    """A plain ViT's head fits every block: timm's ViT keeps it unless ``prune_head``."""
    x = torch.randn(1, 3, 64, 96)
    for indices in ([0, 1, 2, 3], [1, 2]):
        torch.manual_seed(0)
        ours = small(variant, num_classes=7).eval()
        theirs = timm.create_model('vit_tiny_patch16_224', num_classes=7, depth=4, img_size=(64, 96),
                                   dynamic_img_size=True).eval()
        kept = ours.prune_intermediate_layers(indices, prune_head=prune_head)
        assert kept == theirs.prune_intermediate_layers(indices, prune_head=prune_head)
        assert (ours.num_classes, ours.global_pool) == (theirs.num_classes, theirs.global_pool)
        with torch.no_grad():
            out, ref = ours(x), theirs(x)
        assert out.shape[:-1] == ref.shape[:-1]  # tokens (cls first) without the head, else logits
