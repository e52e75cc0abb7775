"""Mixed precision: InLine attention under torch.autocast stays finite and close to float32.

At detection resolution (1600x2432 input: 400x608 = 243k stage-1 tokens) the sums over
tokens of InLine attention (K^T V, the means) add up hundreds of thousands of terms; in
float16 they overflow. The layer runs them in float32 under autocast; these tests check
that outputs and gradients are finite and match float32 within the tolerances below
(relative L2 error; measured values are printed with ``pytest -s``).
"""
import math
from pathlib import Path

import pytest
import torch

from helpers import import_tool
from inline_dense.models import InLineAttention
from inline_dense_dev.gpu_check.attention_step import trained_scale_layer

STAGE1_HW = (400, 608)  # a 1600x2432 image at stride 4
C, HEADS = 96, 3
# bfloat16 keeps 8 mantissa bits (relative step 2^-8 = 0.4%), float16 11 bits (0.05%).
TOL = {torch.bfloat16: 2e-2, torch.float16: 4e-3}
NETWORK_TOL = {torch.bfloat16: 5e-2, torch.float16: 1e-2}

DEVICES = ['cpu', pytest.param('cuda', marks=pytest.mark.skipif(not torch.cuda.is_available(),
                                                               reason='no CUDA device'))]


def cpu_autocast_supports(dtype: torch.dtype) -> bool:
    try:
        with torch.autocast('cpu', dtype=dtype):
            return torch.ones(2, 2) @ torch.ones(2, 2) is not None
    except (RuntimeError, ValueError):
        return False


def dtypes_for(device: str):
    if device == 'cpu':
        return [d for d in (torch.bfloat16, torch.float16) if cpu_autocast_supports(d)]
    return [torch.float16] + ([torch.bfloat16] if torch.cuda.is_bf16_supported() else [])


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def realistic_layer(device: str = 'cpu') -> InLineAttention:
    """Weights at the scale of trained ones (Xavier), not the 0.02 std of a fresh init,
    which would make every activation tiny and the test meaningless: the GPU check's layer."""
    return trained_scale_layer(C, HEADS).to(device)


def realistic_tokens(hw, device: str = 'cpu') -> torch.Tensor:
    """LayerNorm-scale tokens (unit variance) with a per-channel mean: real feature maps
    have one, and it is what makes the token sums grow linearly with N."""
    g = torch.Generator().manual_seed(1)
    n = hw[0] * hw[1]
    return (torch.randn(1, n, C, generator=g) + torch.randn(C, generator=g)).to(device)


def forward_backward(layer, x, hw, probe, dtype):
    """Output and the gradients of <output, probe> w.r.t. the input and the parameters."""
    layer.zero_grad(set_to_none=True)
    x = x.clone().requires_grad_(True)
    with torch.autocast(x.device.type, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        out = layer(x, hw)
    (out.float() * probe).sum().backward()
    grads = {'input': x.grad}
    grads.update({n: p.grad for n, p in layer.named_parameters()})
    return out.detach(), grads


def check_against_fp32(layer, hw, dtype, device):
    x = realistic_tokens(hw, device)
    probe = torch.randn(x.shape, generator=torch.Generator().manual_seed(2)).to(device)
    ref, ref_grads = forward_backward(layer, x, hw, probe, None)
    out, grads = forward_backward(layer, x, hw, probe, dtype)
    assert torch.isfinite(out).all(), f'{dtype}: non-finite outputs'
    bad = [n for n, g in grads.items() if g is None or not torch.isfinite(g).all()]
    assert not bad, f'{dtype}: non-finite or missing gradients for {bad}'
    out_err = rel(out, ref)
    grad_err = {n: rel(g, ref_grads[n]) for n, g in grads.items()}
    print(f'\n{device} {dtype} {hw[0]}x{hw[1]} tokens: output rel err {out_err:.2e}, '
          f'max grad rel err {max(grad_err.values()):.2e} ({max(grad_err, key=grad_err.get)})')
    assert out_err < TOL[dtype], out_err
    assert max(grad_err.values()) < TOL[dtype], grad_err


def test_float16_token_sums_overflow_without_float32():
    """The reason for the float32 path: at 243k tokens, K^T V summed in float16 is inf."""
    layer = realistic_layer()
    x = realistic_tokens(STAGE1_HW)
    with torch.no_grad():
        _, k, v = layer.qkv(x).chunk(3, dim=-1)
        k16 = k.view(-1, HEADS, C // HEADS).transpose(0, 1).half()
        v16 = v.view(-1, HEADS, C // HEADS).transpose(0, 1).half()
        naive = k16.transpose(1, 2) @ v16
        exact = k16.float().transpose(1, 2) @ v16.float()
    assert not torch.isfinite(naive).all()
    assert exact.abs().max() > torch.finfo(torch.float16).max


@pytest.mark.parametrize('device', DEVICES)
def test_inline_attention_autocast_small(device):
    """Every autocast dtype of the device, forward and backward, at 100x152 tokens."""
    layer = realistic_layer(device)
    for dtype in dtypes_for(device):
        check_against_fp32(layer, (100, 152), dtype, device)


@pytest.mark.slow
@pytest.mark.parametrize('device', DEVICES)
def test_inline_attention_autocast_detection_resolution(device):
    """One InLine layer at stage 1 of a 1600x2432 image (243k tokens, C=96, 3 heads)."""
    layer = realistic_layer(device)
    dtypes = dtypes_for(device) if device == 'cuda' else [torch.bfloat16]  # CPU float16: see below
    for dtype in dtypes:
        check_against_fp32(layer, STAGE1_HW, dtype, device)


@pytest.mark.slow
@pytest.mark.skipif(not cpu_autocast_supports(torch.float16), reason='no float16 autocast on CPU')
def test_inline_attention_cpu_float16_forward_detection_resolution():
    """float16 forward at 243k tokens on CPU (the backward is covered at the small size)."""
    layer = realistic_layer()
    x = realistic_tokens(STAGE1_HW)
    with torch.no_grad():
        ref = layer(x, STAGE1_HW)
        with torch.autocast('cpu', dtype=torch.float16):
            out = layer(x, STAGE1_HW)
    assert torch.isfinite(out).all()
    print(f'\ncpu float16 400x608 tokens forward: rel err {rel(out, ref):.2e}')
    assert rel(out, ref) < TOL[torch.float16]


# Overrides of a family's tiny settings for this test; a family without an entry runs on its tiny settings
WHOLE_BACKBONES = {
    'swin': dict(embed_dims=32, depths=(1, 1, 2, 1)),
    'pvt': dict(mlp_ratios=(4, 4, 4, 4), attn_type='IIIS'),
    'deit': dict(out_indices=(0, 1, 2, 3)),  # every block's map
}


def test_whole_backbone_autocast(kind, tiny_backbone):
    """A whole (tiny) backbone on a 128x192 image, train mode, forward and backward."""
    torch.manual_seed(0)
    model = tiny_backbone(kind, drop_path_rate=0.0, **WHOLE_BACKBONES.get(kind, {})).train()
    x = torch.randn(1, 3, 128, 192, generator=torch.Generator().manual_seed(3))
    ref = model(x)
    # gradients of O(1), as loss scaling gives them: float16 has no room for tiny ones
    g = torch.Generator().manual_seed(4)
    probes = [torch.randn(r.shape, generator=g) for r in ref]
    sum((o * p).sum() for o, p in zip(ref, probes)).backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    for dtype in dtypes_for('cpu'):
        model.zero_grad(set_to_none=True)
        with torch.autocast('cpu', dtype=dtype):
            outs = model(x)
            loss = sum((o.float() * p).sum() for o, p in zip(outs, probes))
        loss.backward()
        assert all(torch.isfinite(o).all() for o in outs)
        grads = {n: p.grad for n, p in model.named_parameters()}
        assert all(g is not None and torch.isfinite(g).all() for g in grads.values())
        errs = [rel(o, r) for o, r in zip(outs, ref)]
        grad_err = rel(torch.cat([g.flatten() for g in grads.values()]),
                       torch.cat([g.flatten() for g in ref_grads.values()]))
        print(f'\n{kind} {dtype}: per-stage output rel err {[f"{e:.1e}" for e in errs]}, '
              f'all-gradients rel err {grad_err:.1e}')
        assert max(errs) < NETWORK_TOL[dtype]
        assert grad_err < NETWORK_TOL[dtype]


# ---------------------------------------------------------------------- tools/train.py --amp
TOY_CONFIGS = ['retinanet_inline-pvt-mini_fpn_toy-coco.py', 'upernet_inline-swin-mini_toy-ade.py',
               'fpn_inline-pvt-mini_toy-ade.py', 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py']


def train_amp(name: str, work) -> None:
    """``tools/train.py --amp`` for two iterations of a toy config, in this process (the tool run
    as a script: test_tools_safeguards.py::test_a_missing_dataset_from_the_command_line_has_no_traceback)."""
    opts = ['train_cfg.max_iters=2', 'train_cfg.val_interval=1000', 'train_dataloader.batch_size=2',
            'default_hooks.checkpoint.interval=2', 'default_hooks.logger.interval=1', 'randomness.seed=0']
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        opts += [f'{loader}.num_workers=0', f'{loader}.persistent_workers=False']
    root = Path(__file__).resolve().parents[2]
    # a visualizer of its own: mmengine keeps one per name in the process, writing where it was made
    opts.append(f'visualizer.name=vis_amp_{work.parent.name}')
    import_tool('train').main([str(root / 'configs' / 'toy' / name), '--amp', '--work-dir', str(work),
                               '--cfg-options', *opts])


@pytest.mark.slow
@pytest.mark.parametrize('name', TOY_CONFIGS)
def test_train_tool_amp_with_toy_configs(name, toy_dir, tmp_path, monkeypatch, one_thread):
    """Two iterations of ``tools/train.py --amp`` (bfloat16 autocast on CPU): finite losses
    and weights, and the run really used the AMP optimizer wrapper."""
    import json

    from inline_dense.runtime import precision
    monkeypatch.chdir(toy_dir)
    monkeypatch.setattr(precision, 'native_bf16_cpu', lambda: True)  # bf16 even where it would be emulated
    work = tmp_path / 'work'
    train_amp(name, work)
    dumped = (work / name).read_text()
    assert 'AmpOptimWrapper' in dumped
    assert 'bfloat16' in dumped
    losses = [json.loads(line)['loss'] for path in work.glob('*/vis_data/scalars.json')
              for line in path.read_text().splitlines() if '"loss"' in line]
    assert len(losses) == 2, losses
    assert all(math.isfinite(v) for v in losses), losses
    ckpt = torch.load(work / 'iter_2.pth', map_location='cpu', weights_only=True)
    assert all(torch.isfinite(v).all() for v in ckpt['state_dict'].values() if v.is_floating_point())
