"""An image gives the same features and detections alone and batched with a larger image.

MMDetection pads every image of a batch to the largest one (and to size_divisor 32);
InLine attention is global, so without a mask the padding changes an image's features.
"""
import math
from collections.abc import Sequence

import pytest
import torch

from helpers import build_tiny
from inline_dense.openmmlab.engine import enable_padding_mask, image_shapes, padded_batch

STRIDES = (4, 8, 16, 32)
TOL = 1e-4


# Small backbones with every kind of block where it matters: Swin's shifted windows of 4 (so
# that even these small images have several, shifted, windows in every stage), PVT's reduced
# keys, CSwin's stripes of 3 (several padded stripes) and its last stage's one window.
BACKBONES = {
    'swin-ISMS1': ('swin', dict(embed_dims=32, depths=(2, 2, 2, 2), attn_type='ISMS1', window_size=4)),
    'pvt-SIIS': ('pvt', dict(depths=(2, 1, 1, 2), mlp_ratios=(2, 2, 2, 2), attn_type='SIIS')),
    'pvt-IIII': ('pvt', dict(depths=(2, 1, 1, 2), mlp_ratios=(2, 2, 2, 2), attn_type='IIII')),
    'cswin-ISIS': ('cswin', dict(depths=(1, 2, 1, 2), split_size=(1, 3, 3, 3), mlp_ratio=2)),
}


def backbone(name: str) -> torch.nn.Module:
    kind, settings = BACKBONES[name]
    return build_tiny(kind, drop_path_rate=0.0, **settings).eval()


def valid_region_error(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], hw: tuple[int, int],
                       index_a: int = 0, index_b: int = 0) -> list[float]:
    """Per stage, max |a - b| over the tokens that cover the image's real pixels."""
    errs = []
    for fa, fb, s in zip(a, b, STRIDES):
        h, w = math.ceil(hw[0] / s), math.ceil(hw[1] / s)
        errs.append((fa[index_a, :, :h, :w] - fb[index_b, :, :h, :w]).abs().max().item())
    return errs


@pytest.fixture
def images():
    g = torch.Generator().manual_seed(0)
    small = torch.randn(3, 100, 132, generator=g)  # not a multiple of 32: padded even alone
    exact = torch.randn(3, 96, 128, generator=g)  # a multiple of 32: no mask when alone
    big = torch.randn(3, 160, 224, generator=g)
    return small, exact, big


@pytest.mark.parametrize('name', list(BACKBONES))
def test_backbone_features_do_not_depend_on_batch(name, images):
    torch.manual_seed(0)
    model = backbone(name)
    small, exact, big = images
    with torch.no_grad():
        for img in (small, exact):
            x1, v1 = padded_batch([img], size_divisor=32)  # as mmdet's preprocessor does alone
            x2, v2 = padded_batch([big, img], size_divisor=32)
            alone = model(x1, v1)
            batched = model(x2, v2)
            errs = valid_region_error(alone, batched, img.shape[-2:], 0, 1)
            assert max(errs) < TOL, f'{tuple(img.shape)}: per-stage max error {errs}'
            # the batch-mate's own features are those it has alone, too
            big_alone = model(*padded_batch([big], size_divisor=32))
            assert max(valid_region_error(big_alone, batched, big.shape[-2:])) < TOL
            # and without the mask the padding does change the features: the check has teeth
            unmasked = model(x2)
            assert max(valid_region_error(alone, unmasked, img.shape[-2:], 0, 1)) > 1e-2


@pytest.mark.parametrize('name', ['swin-ISMS1', 'pvt-SIIS', 'pvt-IIII', 'cswin-ISIS'])
def test_unpadded_image_matches_masked_batch(name, images):
    """An image fed at its own size (no padding at all, no mask) gives the features it has in
    a padded batch: the mask makes padding look like the zero padding of the layers."""
    torch.manual_seed(0)
    model = backbone(name)
    small, _, big = images
    with torch.no_grad():
        alone = model(small[None])
        batched = model(*padded_batch([small, big], size_divisor=32))
    errs = valid_region_error(alone, batched, small.shape[-2:])
    assert max(errs) < TOL, errs


def test_pvt_reduced_keys_are_padding_independent_at_every_grid_size():
    """PVT's spatial-reduction stages (sr_ratios 8, 4, 2) alone and in a padded batch, for image
    sides that leave every remainder of the reduction (and one below a block, padded alone too)."""
    torch.manual_seed(0)
    model = build_tiny('pvt', drop_path_rate=0.0, depths=(1, 1, 1, 1), mlp_ratios=(2, 2, 2, 2),
                       attn_type='SSSI').eval()
    g = torch.Generator().manual_seed(3)
    big = torch.randn(3, 128, 128, generator=g)
    with torch.no_grad():
        for h, w in ((33, 33), (36, 44), (60, 52), (64, 100), (20, 28)):
            img = torch.randn(3, h, w, generator=g)
            alone = model(img[None])
            batched = model(*padded_batch([big, img], size_divisor=32))
            errs = valid_region_error(alone, batched, (h, w), 0, 1)
            assert max(errs) < TOL, f'{h}x{w}: per-stage max error {errs}'


def test_single_unpadded_image_takes_the_fast_path(images, monkeypatch):
    """valid_hw that pads nothing gives no mask at all (the single-image path is unchanged)."""
    from inline_dense.layers import inline_attention, padding
    _, exact, _ = images
    model = backbone('swin-ISMS1')
    seen = []
    original = inline_attention.InLineAttention.forward

    def spy(self, x, hw_shape, valid_mask=None):
        seen.append(valid_mask)
        return original(self, x, hw_shape, valid_mask)

    monkeypatch.setattr(inline_attention.InLineAttention, 'forward', spy)
    with torch.no_grad():
        plain = model(exact[None])
        with_shapes = model(exact[None], [tuple(exact.shape[-2:])])
    assert seen
    assert all(m is None for m in seen)
    assert all(torch.equal(a, b) for a, b in zip(plain, with_shapes))
    assert padding.valid_token_mask([(96, 128)], (24, 32), 4, torch.device('cpu')) is None


# ---------------------------------------------------------------------- the plumbing
class FakeSample:
    def __init__(self, img_shape):
        self.metainfo = dict(img_shape=img_shape, pad_shape=None)


class TinyDetector(torch.nn.Module):
    """Calls its backbone like mmdet's detectors: forward(inputs, data_samples, mode)."""

    def __init__(self, backbone: torch.nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, inputs, data_samples=None, mode='tensor'):
        return self.backbone(inputs)


def test_enable_padding_mask_feeds_img_shape_to_the_backbone(images):
    small, _, big = images
    det = TinyDetector(backbone('swin-ISMS1')).eval()
    handle = enable_padding_mask(det)
    assert enable_padding_mask(det) is handle
    assert handle.backbones == [det.backbone]
    x, shapes = padded_batch([small, big], size_divisor=32)
    samples = [FakeSample(s) for s in shapes]
    with torch.no_grad():
        via_hook = det(x, samples, mode='tensor')
        via_kwargs = det(inputs=x, data_samples=samples, mode='tensor')
        explicit = det.backbone(x, shapes)
        plain_call = det.backbone(x)  # outside a model forward: nothing is injected
    assert handle.valid_hw is None  # cleared after the forward
    for a, b, c in zip(via_hook, via_kwargs, explicit):
        assert torch.equal(a, c)
        assert torch.equal(b, c)
    assert not all(torch.equal(a, c) for a, c in zip(plain_call, explicit))
    # a backbone call on another tensor (e.g. a crop) inside the forward is left alone
    handle._before_model(det, (x, samples), {})
    assert handle._before_backbone(det.backbone, (x[:, :, :64, :64],), {}) is None
    assert handle._before_backbone(det.backbone, (x,), {})[1]['valid_hw'] == shapes
    handle._after_model(det, (), None)
    handle.remove()
    with torch.no_grad():
        after_remove = det(x, samples)
    assert all(torch.equal(a, c) for a, c in zip(after_remove, plain_call))


def test_image_shapes_reads_det_and_seg_samples():
    assert image_shapes([FakeSample((10, 20, 3)), dict(img_shape=(5, 6))]) == [(10, 20), (5, 6)]
    assert image_shapes([FakeSample(None)]) is None
    assert image_shapes(None) is None
    mmdet_structures = pytest.importorskip('mmdet.structures')
    sample = mmdet_structures.DetDataSample(metainfo=dict(img_shape=(30, 40)))
    assert image_shapes([sample]) == [(30, 40)]
    mmseg_structures = pytest.importorskip('mmseg.structures')
    sample = mmseg_structures.SegDataSample(metainfo=dict(img_shape=(31, 41)))
    assert image_shapes([sample]) == [(31, 41)]


# ---------------------------------------------------------------------- a whole detector
TOY = __import__('pathlib').Path(__file__).resolve().parents[2] / 'configs' / 'toy'
DET_CONFIGS = ['retinanet_inline-pvt-mini_fpn_toy-coco.py', 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py']


def build_detector(name: str):
    """The toy config's detector, random init, eval mode, every box kept."""
    pytest.importorskip('mmdet')
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(TOY / name))
    if 'rcnn' in cfg.model.test_cfg:
        cfg.model.test_cfg.rcnn.score_thr = 0.0
    else:
        cfg.model.test_cfg.score_thr = 0.0
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model.eval()


def smooth_image(h: int, w: int, seed: int) -> torch.Tensor:
    """A uint8 (3, h, w) image with blobs at several scales (noise alone gives flat scores)."""
    g = torch.Generator().manual_seed(seed)
    img = torch.zeros(3, h, w)
    for scale in (4, 16, 32):
        coarse = torch.rand(1, 3, -(-h // scale), -(-w // scale), generator=g)
        img += torch.nn.functional.interpolate(coarse, size=(h, w), mode='bilinear', align_corners=False)[0]
    return (img / 3 * 255).clamp(0, 255).to(torch.uint8)


def detect(model, images):
    from mmdet.structures import DetDataSample
    samples = [DetDataSample(metainfo=dict(img_shape=tuple(im.shape[-2:]), ori_shape=tuple(im.shape[-2:]),
                                           scale_factor=(1.0, 1.0), img_id=i))
               for i, im in enumerate(images)]
    with torch.no_grad():
        return model.test_step(dict(inputs=list(images), data_samples=samples))


def match_error(alone, batched, top: int = 10):
    """For the ``top`` highest-scoring detections alone: the largest box-corner and score
    difference to the same-label detection of the batched run that overlaps it most (infinite
    when the batched run has no detection of that label at all)."""
    a, b = alone.pred_instances, batched.pred_instances
    order = a.scores.argsort(descending=True)[:top]
    box_err = score_err = 0.0
    for i in order.tolist():
        same = (b.labels == a.labels[i]).nonzero().flatten()
        if not len(same):
            return float('inf'), float('inf')
        j = same[(b.bboxes[same] - a.bboxes[i]).abs().amax(1).argmin()]
        box_err = max(box_err, (b.bboxes[j] - a.bboxes[i]).abs().max().item())
        score_err = max(score_err, abs(b.scores[j].item() - a.scores[i].item()))
    return box_err, score_err


def finest_neck_error(model, image, mate) -> float:
    """Max |difference| of the finest FPN level over the image's valid region, alone vs batched,
    through the data preprocessor (normalisation, padding to size_divisor 32)."""
    from mmdet.structures import DetDataSample
    outs = []
    for images in ([image], [image, mate]):
        samples = [DetDataSample(metainfo=dict(img_shape=tuple(im.shape[-2:]))) for im in images]
        data = model.data_preprocessor(dict(inputs=images, data_samples=samples), False)
        with torch.no_grad():
            feats = model.backbone(data['inputs'], image_shapes(data['data_samples']))
            outs.append(model.neck(feats)[0])
    # the finest neck level: the backbone output the neck starts at
    stride = model.backbone.strides[model.backbone.out_indices[model.neck.start_level]]
    h, w = math.ceil(image.shape[-2] / stride), math.ceil(image.shape[-1] / stride)
    return (outs[0][0, :, :h, :w] - outs[1][0, :, :h, :w]).abs().max().item()


@pytest.mark.slow
@pytest.mark.parametrize('name', DET_CONFIGS)
def test_detections_do_not_depend_on_batch(name):
    """model.test_step on one image alone and batched with a larger one (padded by the data
    preprocessor): the same top-10 detections. Known limit: the 3x3 convs of the neck and head
    at the coarse levels see, at the bottom/right border, zero padding alone and padding
    features batched; only the finest level's features are compared strictly."""
    model = build_detector(name)
    image, mate = smooth_image(100, 132, 0), smooth_image(200, 256, 1)
    enable_padding_mask(model)
    alone = detect(model, [image])[0]
    batched = detect(model, [image, mate])[0]
    box_err, score_err = match_error(alone, batched)
    neck_err = finest_neck_error(model, image, mate)
    # and without the padding mask
    enable_padding_mask(model).remove()
    plain_box_err, plain_score_err = match_error(alone, detect(model, [image, mate])[0])
    print(f'\n{name}: top-10 detections alone vs batched: max box error {box_err:.2e} px, score {score_err:.2e}; '
          f'finest FPN level {neck_err:.1e} (without the padding mask: {plain_box_err:.2e} px, '
          f'{plain_score_err:.2e})')
    assert neck_err < 1e-4
    assert box_err < 0.1
    assert score_err < 1e-3
    assert plain_box_err > 1.0  # the mask is what makes them agree


def test_segmentor_training_batch_features_do_not_depend_on_batch():
    """mmseg pads a training batch to the crop size (SegDataPreProcessor, training=True);
    through the hook the backbone sees each image's img_shape and ignores the padding."""
    pytest.importorskip('mmseg')
    from mmengine.config import Config
    from mmengine.structures import PixelData
    from mmseg.registry import MODELS
    from mmseg.structures import SegDataSample
    from mmseg.utils import register_all_modules
    register_all_modules(init_default_scope=True)
    cfg = Config.fromfile(str(TOY / 'fpn_inline-pvt-mini_toy-ade.py'))
    cfg.model.data_preprocessor.size = None
    cfg.model.data_preprocessor.size_divisor = 32
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    model.eval()
    handle = enable_padding_mask(model)
    captured = []
    model.backbone.register_forward_hook(lambda m, args, out: captured.append(out))
    image, mate = smooth_image(100, 132, 0), smooth_image(160, 224, 1)

    def features(images):
        samples = []
        for im in images:
            sample = SegDataSample(metainfo=dict(img_shape=tuple(im.shape[-2:])))
            sample.gt_sem_seg = PixelData(data=torch.zeros(1, *im.shape[-2:], dtype=torch.long))
            samples.append(sample)
        data = model.data_preprocessor(dict(inputs=list(images), data_samples=samples), True)
        with torch.no_grad():
            model(**data, mode='tensor')
        return captured.pop()

    alone, batched = features([image]), features([image, mate])
    errs = valid_region_error(alone, batched, image.shape[-2:])
    assert max(errs) < TOL, errs
    handle.remove()
    assert max(valid_region_error(alone, features([image, mate]), image.shape[-2:])) > 1e-2
