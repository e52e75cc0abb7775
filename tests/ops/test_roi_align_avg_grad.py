"""The vector gradient of average RoIAlign on CPU gives torchvision's ``_roi_align_backward`` bit for bit:
the same float terms added in the same order, whatever the boxes (off the map, on its last row or
column, empty, legacy one-pixel minimum), the grid, the dtype, the threads and the chunking."""
import pytest
import torch
import torchvision  # noqa: F401  (registers torch.ops.torchvision.*)

from inline_dense.ops import roi_align_avg_grad
from inline_dense.ops.roi_align_avg_grad import roi_align_avg_backward


def torchvision_backward(grad_output, rois, scale, ratio, aligned, shape):
    batch, channels, height, width = shape
    return torch.ops.torchvision._roi_align_backward(grad_output, rois.to(grad_output.dtype), scale,
                                                     grad_output.shape[2], grad_output.shape[3], batch, channels,
                                                     height, width, ratio, aligned)


def random_rois(gen, count, batch, image_hw, dtype=torch.float32):
    """Boxes of every kind: inside, straddling and past the borders, flat or empty, large."""
    h, w = image_hw
    xy = torch.rand(count, 2, generator=gen) * torch.tensor([w * 1.4, h * 1.4]) - torch.tensor([w * 0.2, h * 0.2])
    wh = torch.rand(count, 2, generator=gen) * torch.tensor([w * 0.8, h * 0.8])
    wh[::7] = 0.0  # empty boxes: no sample with aligned=True, one pixel in the legacy mode
    wh[3::11, 1] = 0.3  # a fraction of a pixel high
    index = torch.randint(0, batch, (count, 1), generator=gen).to(dtype)
    return torch.cat([index, xy.to(dtype), (xy + wh).to(dtype)], dim=1)


@pytest.fixture
def vector_path(monkeypatch):
    """Every call through the vector path, in small chunks whose edges fall inside RoIs and bins."""
    monkeypatch.setattr(roi_align_avg_grad, 'MIN_VECTOR_OUTPUTS', 0)
    monkeypatch.setattr(roi_align_avg_grad, 'GEOMETRY_SAMPLES', 97)
    monkeypatch.setattr(roi_align_avg_grad, 'TERM_SAMPLES', 13)


@pytest.mark.parametrize('threads', [1, 2])
@pytest.mark.parametrize('dtype', [torch.float32, torch.float64])
@pytest.mark.parametrize(('ratio', 'aligned'), [(0, True), (2, True), (0, False), (3, False)])
@pytest.mark.parametrize(('pooled', 'scale'), [((7, 7), 0.25), ((3, 5), 0.125), ((14, 14), 1.0)])
def test_the_same_sums_as_torchvision(vector_path, pooled, scale, ratio, aligned, dtype, threads):
    gen = torch.Generator().manual_seed(hash((pooled, scale, ratio, aligned)) % 2**31)
    shape = (3, 5, 11, 17)
    rois = random_rois(gen, 40, shape[0], (shape[2] / scale, shape[3] / scale), dtype)
    grad_output = torch.randn(40, shape[1], *pooled, generator=gen, dtype=dtype)
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = roi_align_avg_backward(grad_output, rois, scale, ratio, aligned, shape)
    finally:
        torch.set_num_threads(old)
    want = torchvision_backward(grad_output, rois, scale, ratio, aligned, shape)
    assert got.dtype == want.dtype
    assert got.shape == want.shape
    assert torch.equal(got, want), (got - want).abs().max()


def test_the_default_chunks_on_detector_sized_calls_give_the_same_sums():
    """The chunk sizes the package runs with, on a call the size of a Mask R-CNN box head's level:
    several term chunks and more than one geometry chunk (grids of up to 8 x 8 samples a bin), rows
    wide enough for torch to split the adds across two threads."""
    gen = torch.Generator().manual_seed(0)
    shape = (2, 64, 50, 84)
    rois = random_rois(gen, 600, 2, (200, 336))
    grad_output = torch.randn(600, 64, 7, 7, generator=gen)
    samples = roi_align_avg_grad._roi_grids(rois, 0.25, 7, 7, 0, True)[1].prod(dim=1).sum() * 49
    assert samples > roi_align_avg_grad.GEOMETRY_SAMPLES
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        got = roi_align_avg_backward(grad_output, rois, 0.25, 0, True, shape)
    finally:
        torch.set_num_threads(old)
    assert torch.equal(got, torchvision_backward(grad_output, rois, 0.25, 0, True, shape))


def test_a_gradient_off_the_map_stays_out(vector_path):
    """A bin whose samples all lie more than a pixel off the map adds nothing, not 0 * its gradient:
    a NaN there leaves the features' gradient finite, as in torchvision's loop."""
    shape = (1, 2, 8, 8)
    rois = torch.tensor([[0.0, 1.0, 1.0, 6.0, 6.0], [0.0, 20.0, 20.0, 30.0, 30.0]])
    grad_output = torch.ones(2, 2, 2, 2)
    grad_output[1] = float('nan')
    got = roi_align_avg_backward(grad_output, rois, 1.0, 2, True, shape)
    assert torch.isfinite(got).all()
    assert torch.equal(got, torchvision_backward(grad_output, rois, 1.0, 2, True, shape))


def test_boxes_without_samples_give_zeros(vector_path):
    shape = (2, 3, 6, 6)
    rois = torch.tensor([[1.0, 2.0, 2.0, 2.0, 2.0], [0.0, 4.0, 1.0, 4.0, 3.0]])
    got = roi_align_avg_backward(torch.randn(2, 3, 2, 2), rois, 1.0, 0, True, shape)
    assert torch.equal(got, torch.zeros(shape))


def test_small_calls_take_torchvisions_loop(monkeypatch):
    """Below MIN_VECTOR_OUTPUTS the fixed cost of the vector ops outweighs the loop; above it, no loop."""
    calls = []
    real = torch.ops.torchvision._roi_align_backward

    class Ops:
        @staticmethod
        def _roi_align_backward(*args):
            calls.append(args)
            return real(*args)

    monkeypatch.setattr(torch.ops, 'torchvision', Ops)
    rois = torch.tensor([[0.0, 1.0, 1.0, 6.0, 6.0]])
    roi_align_avg_backward(torch.randn(1, 2, 7, 7), rois, 1.0, 0, True, (1, 2, 8, 8))
    assert len(calls) == 1
    big = torch.randn(1, roi_align_avg_grad.MIN_VECTOR_OUTPUTS // 49 + 1, 7, 7)
    roi_align_avg_backward(big, rois, 1.0, 0, True, (1, big.shape[1], 8, 8))
    assert len(calls) == 1
