"""The mmcv-lite stand-in (inline_dense/ops/ext.py) refuses inputs it cannot compute on.

Compiled mmcv reads out of bounds for some of these (an RoI's batch index past the batch gave
2.25e30 from the stand-in); the stand-in raises one line naming the argument and the fix.
"""
import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (installs the mmcv._ext finder)


def _ext():
    from inline_dense.openmmlab.mmcv_ops import mmcv_ext
    return mmcv_ext()


pytestmark = pytest.mark.skipif(not getattr(_ext(), 'IS_STAND_IN', False),
                                reason='a test of the mmcv-lite stand-in; compiled mmcv here')


def _feats() -> torch.Tensor:
    return torch.arange(2 * 3 * 8 * 8, dtype=torch.float32).reshape(2, 3, 8, 8)


def _one_line(err: pytest.ExceptionInfo) -> str:
    text = str(err.value)
    assert '\n' not in text, text
    assert type(err.value).__name__ == 'OpInputError', text
    return text


@pytest.mark.parametrize('pool_mode', ['avg', 'max'])
@pytest.mark.parametrize(('index', 'words'), [(2., 'batch index 2.0'), (-1., 'batch index -1.0'),
                                          (0.5, 'batch index 0.5')])
def test_roi_align_refuses_a_batch_index_outside_the_batch(pool_mode, index, words):
    from mmcv.ops import roi_align
    rois = torch.tensor([[0., 1., 1., 5., 5.], [index, 1., 1., 5., 5.]])
    with pytest.raises(ValueError) as err:
        roi_align(_feats(), rois, (2, 2), 1.0, 2, pool_mode, True)
    text = _one_line(err)
    assert 'RoI 1' in text
    assert words in text
    assert '[0, 2)' in text


@pytest.mark.parametrize('bad', [float('nan'), float('inf')])
def test_roi_align_refuses_non_finite_boxes(bad):
    from mmcv.ops import roi_align
    rois = torch.tensor([[0., 1., 1., bad, 5.]])
    with pytest.raises(ValueError) as err:
        roi_align(_feats(), rois, (2, 2), 1.0, 2, 'avg', True)
    assert 'non-finite coordinate' in _one_line(err)


def test_roi_align_refuses_bad_shapes_dtypes_and_settings():
    ext = _ext()
    feats, rois = _feats(), torch.tensor([[0., 1., 1., 5., 5.]])

    def call(feats=feats, rois=rois, out_shape=(1, 3, 2, 2), **kw):
        args = dict(aligned_height=2, aligned_width=2, spatial_scale=1.0, sampling_ratio=2, pool_mode=1,
                    aligned=True)
        args.update(kw)
        out = torch.zeros(out_shape)
        with pytest.raises(ValueError) as err:
            ext.roi_align_forward(feats, rois, out, out.clone(), out.clone(), **args)
        return _one_line(err)

    assert 'rois must be (K, 5)' in call(rois=rois[:, 1:])
    assert 'bbox2roi' in call(rois=rois[:, 1:])
    assert 'input must be (B, C, H, W)' in call(feats=feats[0])
    assert 'input must be a floating-point tensor' in call(feats=feats.long())
    assert 'rois must be a floating-point tensor' in call(rois=rois.long())
    assert 'output must have shape (1, 3, 2, 2)' in call(out_shape=(1, 3, 3, 3))
    assert 'spatial_scale' in call(spatial_scale=0.0)
    assert 'sampling_ratio' in call(sampling_ratio=-1)
    assert 'pool_mode' in call(pool_mode=2)
    assert 'output_size' in call(aligned_height=0, out_shape=(1, 3, 0, 2))


def test_roi_align_backward_checks_its_rois_too():
    ext = _ext()
    grad_in = torch.zeros(2, 3, 8, 8)
    rois = torch.tensor([[5., 1., 1., 5., 5.]])
    grad_out = torch.ones(1, 3, 2, 2)
    with pytest.raises(ValueError) as err:
        ext.roi_align_backward(grad_out, rois, grad_out.clone(), grad_out.clone(), grad_in, aligned_height=2,
                               aligned_width=2, spatial_scale=1.0, sampling_ratio=2, pool_mode=1, aligned=True)
    assert 'batch index 5.0' in _one_line(err)
    assert grad_in.abs().sum() == 0


def test_nms_refuses_non_finite_and_mismatched_inputs():
    from mmcv.ops import nms
    ext = _ext()
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., float('nan')]])
    with pytest.raises(ValueError) as err:
        nms(boxes, torch.tensor([.9, .8]), .5)
    assert 'NaN or inf' in _one_line(err)
    with pytest.raises(ValueError) as err:
        ext.nms(boxes[:, :3], torch.tensor([.9, .8]), .5)
    assert 'boxes must be (N, 4)' in _one_line(err)
    with pytest.raises(ValueError) as err:
        ext.nms(boxes.nan_to_num(), torch.tensor([.9, .8, .7]), .5)
    assert 'scores must be (N,) = (2,)' in _one_line(err)
    with pytest.raises(ValueError) as err:
        ext.nms(boxes.nan_to_num(), torch.tensor([.9, .8]), float('nan'))
    assert 'iou_threshold' in _one_line(err)


@pytest.mark.parametrize('kind', ['sigmoid', 'softmax'])
def test_focal_losses_refuse_targets_outside_the_classes(kind):
    ext = _ext()
    logits = torch.randn(3, 4)
    # sigmoid: class 4 (= C) is the background and allowed; softmax has no background class.
    ok, bad = (torch.tensor([0, 3, 4]), torch.tensor([0, 5, 1])) if kind == 'sigmoid' else \
        (torch.tensor([0, 3, 2]), torch.tensor([0, 4, 1]))
    forward = getattr(ext, f'{kind}_focal_loss_forward')
    out_shape = (3, 4) if kind == 'sigmoid' else (3,)
    scores = logits if kind == 'sigmoid' else logits.softmax(1)
    forward(scores, ok, logits.new_empty(0), torch.zeros(out_shape), gamma=2.0, alpha=0.25)
    for target, words in [(bad, f'target holds class {int(bad[1])}'), (torch.tensor([0, -1, 1]), 'class -1'),
                          (ok.int(), 'target must be int64'), (ok[:2], 'target must be (N,) = (3,)')]:
        with pytest.raises(ValueError) as err:
            forward(scores, target, logits.new_empty(0), torch.zeros(out_shape), gamma=2.0, alpha=0.25)
        assert words in _one_line(err)
    with pytest.raises(ValueError) as err:
        forward(scores, ok, torch.ones(3), torch.zeros(out_shape), gamma=2.0, alpha=0.25)
    assert 'one weight per class (4,)' in _one_line(err)


@pytest.mark.parametrize('pool_mode', ['avg', 'max'])
@pytest.mark.parametrize('box', [[5., 1., 1., 5.], [1., 5., 5., 1.]])
def test_roi_align_refuses_an_inverted_box_in_both_modes_as_mmcv(pool_mode, box):
    """avg returned zeros (torchvision's kernel) and max a plain ValueError; mmcv's kernel refuses
    an inverted box with aligned=True in both modes."""
    from mmcv.ops import roi_align
    rois = torch.tensor([[0., 1., 1., 5., 5.], [0., *box]])
    with pytest.raises(ValueError) as err:
        roi_align(_feats(), rois, (2, 2), 1.0, 0, pool_mode, True)
    text = _one_line(err)
    assert 'RoI 1' in text
    assert 'inverted' in text
    assert 'x1 <= x2' in text


@pytest.mark.parametrize('pool_mode', ['avg', 'max'])
def test_roi_align_legacy_mode_samples_an_inverted_box_as_one_pixel(pool_mode):
    """aligned=False: mmcv makes every box at least one pixel wide and high, from (x1, y1)."""
    from mmcv.ops import roi_align
    feats = _feats()
    got = roi_align(feats, torch.tensor([[0., 2., 3., 1., 2.]]), (2, 2), 1.0, 2, pool_mode, False)
    one_pixel = roi_align(feats, torch.tensor([[0., 2., 3., 3., 4.]]), (2, 2), 1.0, 2, pool_mode, False)
    assert got.abs().sum() > 0
    assert torch.equal(got, one_pixel)


@pytest.mark.parametrize('pool_mode', ['avg', 'max'])
@pytest.mark.parametrize('aligned', [True, False])
def test_roi_align_refuses_a_huge_box_before_allocating(pool_mode, aligned):
    """x2 = 1e9 asked the max kernel for about 1 TB; at a fixed sampling ratio
    the same box is cheap and still runs."""
    from mmcv.ops import roi_align
    rois = torch.tensor([[0., 1., 1., 1e9, 5.]])
    with pytest.raises(ValueError) as err:
        roi_align(_feats(), rois, (2, 2), 1.0, 0, pool_mode, aligned)
    text = _one_line(err)
    assert 'RoI 0' in text
    assert 'sampling_ratio > 0' in text
    assert 'clip' in text
    assert torch.isfinite(roi_align(_feats(), rois, (2, 2), 1.0, 2, pool_mode, aligned)).all()


def test_roi_align_backward_refuses_a_huge_box_too():
    ext = _ext()
    grad_out, grad_in = torch.ones(1, 3, 2, 2), torch.zeros(2, 3, 8, 8)
    rois = torch.tensor([[0., 1., 1., 5., 3e8]])
    with pytest.raises(ValueError, match='feature pixels'):
        ext.roi_align_backward(grad_out, rois, grad_out.clone(), grad_out.clone(), grad_in, aligned_height=2,
                               aligned_width=2, spatial_scale=1.0, sampling_ratio=0, pool_mode=1, aligned=True)
