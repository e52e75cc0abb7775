"""mmcv 2.1.0 was built with its compiled ops, and they compute the right thing on CPU.

Expected values are worked out by hand in the comments, not taken from a run.
"""
import pytest
import torch


def test_compiled_extension_is_present():
    import mmcv
    try:
        import mmcv._ext as ext
    except ImportError as exc:
        pytest.fail(f'mmcv has no compiled ops ({exc}); run: bash tools/setup_env.sh')
    assert mmcv.__version__ == '2.1.0'
    assert hasattr(ext, 'nms') and hasattr(ext, 'roi_align_forward')


def test_nms_cpu_known_boxes():
    from mmcv.ops import nms
    boxes = torch.tensor([[0., 0., 10., 10.],
                          [1., 1., 11., 11.],     # IoU with box 0: 81 / (100 + 100 - 81) = 0.681
                          [20., 20., 30., 30.],   # disjoint from all others
                          [0., 0., 10., 10.5]])   # IoU with box 0: 100 / 105 = 0.952
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6])

    dets, keep = nms(boxes, scores, iou_threshold=0.5)
    assert keep.tolist() == [0, 2]
    torch.testing.assert_close(dets, torch.tensor([[0., 0., 10., 10., 0.9], [20., 20., 30., 30., 0.7]]))

    # 0.681 < 0.7: box 1 survives; box 3 (0.952) is still suppressed.
    _, keep = nms(boxes, scores, iou_threshold=0.7)
    assert keep.tolist() == [0, 1, 2]

    # Sorted by score, whatever the input order.
    perm = torch.tensor([3, 2, 1, 0])
    _, keep = nms(boxes[perm], scores[perm], iou_threshold=0.5)
    assert perm[keep].tolist() == [0, 2]


def _ramp_features() -> torch.Tensor:
    """(1, 2, 4, 4) features: channel 0 is f(x, y) = x + 4y at pixel (x, y), channel 1 is 3.

    Bilinear interpolation reproduces a linear function exactly, so an average-pooled
    bin of channel 0 equals f at the bin centre (as long as no sample is clamped).
    """
    ys, xs = torch.meshgrid(torch.arange(4.), torch.arange(4.), indexing='ij')
    return torch.stack([xs + 4 * ys, torch.full((4, 4), 3.)])[None]


def test_roi_align_cpu_known_values():
    from mmcv.ops import RoIAlign
    feats = _ramp_features()
    rois = torch.tensor([[0., 1., 1., 3., 3.]])  # (batch index, x1, y1, x2, y2)

    # aligned=True shifts by half a pixel: the RoI spans pixel coordinates 0.5..2.5,
    # two bins of width 1 centred at 1.0 and 2.0 -> f = cx + 4 * cy.
    out = RoIAlign((2, 2), spatial_scale=1.0, sampling_ratio=2, aligned=True)(feats, rois)
    torch.testing.assert_close(out[0, 0], torch.tensor([[5., 6.], [9., 10.]]))
    torch.testing.assert_close(out[0, 1], torch.full((2, 2), 3.))

    # aligned=False: the RoI spans 1..3, bin centres 1.5 and 2.5.
    out = RoIAlign((2, 2), spatial_scale=1.0, sampling_ratio=2, aligned=False)(feats, rois)
    torch.testing.assert_close(out[0, 0], torch.tensor([[7.5, 8.5], [11.5, 12.5]]))

    # spatial_scale maps image coordinates onto the feature map: the same RoI given
    # at twice the resolution lands on the same features.
    out = RoIAlign((2, 2), spatial_scale=0.5, sampling_ratio=2, aligned=True)(feats, rois * torch.tensor(
        [1., 2., 2., 2., 2.]))
    torch.testing.assert_close(out[0, 0], torch.tensor([[5., 6.], [9., 10.]]))


def test_roi_align_cpu_backward():
    from mmcv.ops import RoIAlign
    feats = _ramp_features().requires_grad_(True)
    rois = torch.tensor([[0., 1., 1., 3., 3.]])
    out = RoIAlign((2, 2), spatial_scale=1.0, sampling_ratio=2, aligned=True)(feats, rois)
    out.sum().backward()
    # Each output cell averages 2x2 samples; along one axis the samples sit at
    # 0.75, 1.25, 1.75, 2.25 (pixel units), so pixel p collects bilinear weight
    # S(p) = sum(max(0, 1 - |s - p|)) = 0.25, 1.75, 1.75, 0.25 for p = 0..3, and
    # d out.sum() / d feats[y, x] = S(y) * S(x) / 4 (summing to 4 per channel).
    s = torch.tensor([0.25, 1.75, 1.75, 0.25])
    expected = torch.outer(s, s) / 4
    torch.testing.assert_close(feats.grad[0, 0], expected)
    torch.testing.assert_close(feats.grad[0, 1], expected)
