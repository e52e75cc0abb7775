"""A user's own trace of an smp model on an InLine-Swin encoder (``torch.jit.trace``, ``torch.onnx.export``)
from a small example holds at every size: Swin's softmax blocks attend a grid within one window as
one unshifted window, and the traced graph must not keep that branch (or its absence) for all sizes.

Traced, the blocks take one path for every size (``ShiftWindowMSA._shift_traced``: the shift is a
tensor, 0 where the grid fits in one window)."""

import pytest
import torch

smp = pytest.importorskip('segmentation_models_pytorch')

import inline_dense.smp  # noqa: E402,F401  (registers the encoders)
from helpers import NARROW  # noqa: E402

SMALL = (2, 3, 64, 96)    # last stage 2 x 3 tokens: within one window (7)
LARGE = (1, 3, 320, 288)  # last stage 10 x 9: several, shifted, windows; stage 2 20 x 18
FITS = (2, 3, 192, 200)   # last stage 6 x 7: one window, which a shift by 3 would split


def swin_unet() -> torch.nn.Module:
    """smp's Unet on a narrow InLine-Swin-T (its layout: softmax blocks, shifted on odd ones, in the
    last stage)."""
    torch.manual_seed(0)
    return smp.Unet('tu-inline_swin_t', encoder_weights=None, classes=2, depths=(1, 1, 1, 2), drop_path_rate=0.0,
                    **NARROW['inline_swin_t']).eval()


def inputs(*shapes):
    g = torch.Generator().manual_seed(1)
    return [torch.randn(*s, generator=g) for s in shapes]


@pytest.mark.parametrize(('example', 'other'), [(SMALL, LARGE), (LARGE, FITS)],
                         ids=['small-to-large', 'large-to-small'])
def test_jit_trace_holds_at_other_sizes(example, other, one_thread):
    model = swin_unet()
    x, y = inputs(example, other)
    with torch.no_grad():
        traced = torch.jit.trace(model, x, check_trace=False)
        for z in (x, y):
            torch.testing.assert_close(traced(z), model(z), rtol=0, atol=1e-4)


@pytest.mark.slow
def test_onnx_export_from_a_small_example_runs_larger_in_onnxruntime(tmp_path, one_thread):
    ort = pytest.importorskip('onnxruntime')
    model = swin_unet()
    x, y = inputs(SMALL, LARGE)
    dim = torch.export.Dim.DYNAMIC
    with torch.no_grad():
        program = torch.onnx.export(model, (x,), dynamo=True, input_names=['image'],
                                    dynamic_shapes=({0: dim, 2: dim, 3: dim},), verbose=False)
        expected = model(y)
    path = tmp_path / 'unet.onnx'
    program.save(str(path), external_data=False)
    session = ort.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    out = torch.from_numpy(session.run(None, {'image': y.numpy()})[0])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-4)
