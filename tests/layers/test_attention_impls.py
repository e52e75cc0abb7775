"""InLineAttention's folded evaluations compute what its textbook one computes."""
import re

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from inline_dense.layers.inline_attention import InLineAttention


def make(c: int, heads: int, seed: int = 0, **kwargs) -> InLineAttention:
    torch.manual_seed(seed)
    attn = InLineAttention(c, heads, **kwargs)
    with torch.no_grad():  # weights far from the init's small values, non-zero biases
        for p in attn.parameters():
            p.normal_(0, 0.2)
    return attn


def twin(attn: InLineAttention, impl: str) -> InLineAttention:
    """The same weights, evaluated by ``impl``."""
    other = InLineAttention(attn.embed_dims, attn.num_heads, impl=impl, lepe=attn.get_v is not None)
    other.load_state_dict(attn.state_dict())
    return other.train(attn.training)


def both(attn: InLineAttention, x: torch.Tensor, hw, mask=None, grad: bool = False, residual_input=None):
    """(reference, attn) outputs, or (output, grads) pairs with ``grad``."""
    outs = []
    for module in (twin(attn, 'reference'), attn):
        xi = x.clone().requires_grad_(grad)
        out = module(xi, hw, mask, residual_input=residual_input)
        if grad:
            out.square().sum().backward()
            outs.append((out.detach(), [p.grad.clone() for p in module.parameters()] + [xi.grad]))
        else:
            outs.append(out)
    return outs


def padding_mask(b: int, hw, valid_hw) -> torch.Tensor:
    mask = torch.zeros(b, *hw, dtype=torch.bool)
    mask[0, :valid_hw[0], :valid_hw[1]] = True
    mask[1:] = True
    return mask.view(b, -1)


# (channels, heads, grid, route): the Gram route needs n > c * (heads + 1) tokens
CASES = [(32, 1, (30, 20), 'gram'), (96, 3, (40, 36), 'gram'), (96, 3, (14, 18), 'keys'),
         (512, 16, (4, 6), 'keys')]


@pytest.mark.parametrize(('c', 'heads', 'hw', 'route'), CASES)
@pytest.mark.parametrize('masked', [False, True])
@pytest.mark.parametrize('impl', ['auto', 'folded_gram', 'folded_keys'])
def test_folded_equals_reference(c, heads, hw, route, masked, impl):
    attn = make(c, heads, impl=impl).eval()
    n = hw[0] * hw[1]
    assert attn.use_gram(n) == (route == 'gram')
    x = torch.randn(2, n, c) + 0.5
    mask = padding_mask(2, hw, (hw[0] - 2, hw[1] - 3)) if masked else None
    with torch.no_grad():
        ref, fast = both(attn, x, hw, mask)
    scale = ref.abs().max()
    assert (fast - ref).abs().max() <= 2e-6 * scale


@pytest.mark.parametrize('masked', [False, True])
def test_folded_lepe_and_residual_input_equal_reference(masked):
    """InLine-CSwin's variant: LePE folded into the local filter, the filter predicted from another input."""
    attn = make(64, 2, lepe=True).eval()
    hw = (14, 18)
    x, raw = torch.randn(2, 14 * 18, 64), torch.randn(2, 14 * 18, 64)
    mask = padding_mask(2, hw, (11, 15)) if masked else None
    with torch.no_grad():
        ref, fast = both(attn, x, hw, mask, residual_input=raw)
        without = attn(x, hw, mask)
    assert (fast - ref).abs().max() <= 2e-6 * ref.abs().max()
    assert (without - ref).abs().max() > 1e-3 * ref.abs().max()  # residual_input matters


@pytest.mark.parametrize(('c', 'heads', 'hw'), [CASES[1][:3], CASES[2][:3]])
def test_folded_gradients_equal_reference(c, heads, hw):
    attn = make(c, heads).train()
    x = torch.randn(2, hw[0] * hw[1], c)
    mask = padding_mask(2, hw, (hw[0] - 1, hw[1] - 4))
    (out_r, grads_r), (out_f, grads_f) = both(attn, x, hw, mask, grad=True)
    assert torch.allclose(out_f, out_r, rtol=0, atol=2e-6 * out_r.abs().max())
    for g_f, g_r in zip(grads_f, grads_r):
        assert (g_f - g_r).abs().max() <= 1e-5 * g_r.abs().max()


def test_padded_tokens_do_not_change_valid_outputs():
    attn = make(64, 2).eval()
    hw, valid = (12, 16), (9, 11)
    x = torch.randn(1, valid[0] * valid[1], 64)
    alone = attn(x, valid)
    grid = torch.randn(1, *hw, 64) * 5  # garbage in the padding
    grid[:, :valid[0], :valid[1]] = x.view(1, *valid, 64)
    mask = torch.zeros(1, *hw, dtype=torch.bool)
    mask[:, :valid[0], :valid[1]] = True
    padded = attn(grid.view(1, -1, 64), hw, mask.view(1, -1)).view(1, *hw, 64)
    # the 3x3 residual at the valid border sees zeros where the padding is, as at the image edge
    assert torch.allclose(padded[:, :valid[0], :valid[1]].reshape(1, -1, 64), alone, atol=2e-5)


def test_reference_path_is_used_where_folding_does_not_apply():
    assert not InLineAttention(32, 2, kernel='relu').folds()
    assert not InLineAttention(32, 2, impl='reference').folds()
    attn = InLineAttention(32, 2, attn_drop=0.1)
    assert attn.train().folds() is False
    assert attn.eval().folds() is True


@pytest.mark.parametrize(('kwargs', 'fragment'), [
    (dict(impl='fast'), "unknown impl 'fast'"),
    (dict(impl='folded_gram', kernel='relu'), "needs kernel='identity' and attn_drop=0"),
    (dict(impl='folded_keys', attn_drop=0.1), "use impl='auto' or 'reference'"),
])
def test_impl_choice_is_checked(kwargs, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        InLineAttention(32, 2, **kwargs)


def test_folded_autocast_reductions_stay_float32():
    attn = make(64, 2).eval()
    hw = (24, 20)
    x = torch.randn(1, hw[0] * hw[1], 64) * 30 + 200  # sums that bfloat16 would ruin
    reference = twin(attn, 'reference')
    with torch.no_grad():
        exact = attn(x, hw)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            ref = reference(x, hw).float()
            fast = attn(x, hw).float()
    err_ref = (ref - exact).abs().max()
    err_fast = (fast - exact).abs().max()
    assert err_fast <= 2 * err_ref + 1e-3 * exact.abs().max()


@pytest.mark.parametrize('masked', [False, True])
def test_centred_bf16_context_keeps_float32_means(masked):
    """Eager bfloat16: the mean and the token covariance come from bfloat16 sums and one bfloat16 Gram
    (no float32 copy of x), yet the mean is good to about 2^-18 of it (a bfloat16 mean is off by up to
    2^-9 of it) and the context matches the float64 covariance's within bfloat16's rounding of the centred tokens."""
    attn = make(48, 2).eval()
    g = torch.Generator().manual_seed(5)
    n = 3000
    x = (torch.randn(2, n, 48, generator=g) * 3 + 200).bfloat16()  # a mean far above the spread
    keep = None
    xd = x.double()
    count = torch.full((2, 1), float(n), dtype=torch.float32)
    if masked:
        keep = (torch.arange(n) < torch.tensor([[n], [2000]])).unsqueeze(-1).float()  # (2, N, 1)
        count = keep.sum(1)
    weights = torch.ones(2, n, 1, dtype=torch.float64) if keep is None else keep.double()
    mean = (xd * weights).sum(1) / weights.sum(1)
    centred = (xd - mean.unsqueeze(1)) * weights
    cov = centred.transpose(1, 2) @ centred / weights.sum(1).unsqueeze(-1)
    c = attn.embed_dims
    w = attn.qkv.weight.detach().double()
    exact_ctx = attn.context_from_cov(cov, w[c:2 * c], w[2 * c:])
    with torch.no_grad():
        got_mean, got_ctx = attn.context_from_centred(x, keep, count)
    assert got_mean.dtype == got_ctx.dtype == torch.float32
    assert rel(got_mean, mean) < 2e-5
    assert rel(mean.bfloat16(), mean) > 2e-5  # what a bfloat16 mean would give
    assert rel(got_ctx, exact_ctx) < 1e-2


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b).norm() / b.norm()).item()


@pytest.mark.parametrize(('c', 'heads', 'hw'), [(96, 3, (12, 16)), (128, 8, (20, 40))])
def test_bf16_centred_gram_below_the_float32_threshold(c, heads, hw):
    """Eager bfloat16 takes the centred Gram from N > C on, where float32 would take the keys: the same
    function within bfloat16's bound, on tokens with a mean far above their spread (where the keys route,
    whose v is rounded to bfloat16 before K^T V / N - mean(k) mean(v)^T cancels, is off by several %)."""
    attn = make(c, heads).eval()
    n = hw[0] * hw[1]
    assert c < n
    assert attn.centred_gram(n)
    assert not attn.use_gram(n)
    x = torch.randn(1, n, c, generator=torch.Generator().manual_seed(6)) * 3 + 20
    with torch.no_grad():
        exact = attn(x, hw)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            fast = attn(x, hw)
            keys = twin(attn, 'folded_keys')(x, hw)
    err_fast = rel(fast.float(), exact.double())
    err_keys = rel(keys.float(), exact.double())
    assert err_fast < 2e-2
    assert err_keys > 2e-2


class Float32TokenTensors(TorchDispatchMode):
    """Records each op whose output is a float32 tensor with a dimension of ``n`` (the token count)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if isinstance(out, torch.Tensor) and out.dtype == torch.float32 and self.n in out.shape:
            self.ops.append(str(func))
        return out


@pytest.mark.parametrize(('c', 'heads', 'hw'), [(96, 3, (10, 14)), (128, 8, (20, 40))])
def test_bf16_model_takes_the_centred_gram_as_autocast_does(c, heads, hw):
    """A model cast to bfloat16 (``model.bfloat16()``, no autocast) reads its bfloat16 tokens as autocast's cast
    does, by the centred bfloat16 Gram: no float32 copy of the tokens (the float32 routes made one, and float32
    keys below the Gram threshold), and the result within bfloat16's bound of float32."""
    attn = make(c, heads).eval()
    n = hw[0] * hw[1]
    assert attn.centred_gram(n)
    assert not attn.use_gram(n)
    x = torch.randn(1, n, c, generator=torch.Generator().manual_seed(7)) * 3 + 20
    bf16 = twin(attn, 'auto').bfloat16()
    with torch.no_grad():
        exact = attn(x, hw)
        with Float32TokenTensors(n) as seen:
            got = bf16(x.bfloat16(), hw)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            autocast = attn(x, hw)
    assert seen.ops == []
    assert got.dtype == torch.bfloat16
    assert rel(got.float(), exact.double()) < 2e-2
    assert rel(got.float(), autocast.double()) < 1e-2
