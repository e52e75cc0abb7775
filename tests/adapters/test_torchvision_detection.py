"""InLine backbone + FPN under torchvision's detectors (Faster / Mask / Keypoint R-CNN, RetinaNet,
FCOS): a training step, eval output, an image's detections unchanged by the padding a larger batch
adds (``pass_image_sizes``), torchvision's FPN-builder options (``weights``, ``trainable_layers``,
``returned_layers``, ``extra_blocks``, ``norm_layer``) and the one-line refusals."""
import enum
import os
import warnings
from collections import OrderedDict

import pytest
import torch
from reference_models import FIXTURES
from torchvision.models import ResNet50_Weights
from torchvision.models.detection import FCOS, FasterRCNN, KeypointRCNN, MaskRCNN, RetinaNet
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.ops.feature_pyramid_network import ExtraFPNBlock, LastLevelP6P7

import inline_dense.torchvision_detection as tvd
from helpers import PYRAMIDS, SHALLOW, no_network_downloads
from inline_dense.checkpoint import CheckpointError
from inline_dense.torchvision_detection import InLineFPNBackbone, inline_fpn_backbone, pass_image_sizes

# torchvision resizes the shorter side to 160 (these keep their size); pass_image_sizes pads to 64s
RESIZE = dict(min_size=160, max_size=512)
IMAGE = (160, 200)  # alone: padded to 192 x 256
LARGER = [(160, 400), (400, 160)]  # next to these: padded to 448 x 448


def backbone(variant, **kwargs):
    torch.manual_seed(0)
    """Each family's smallest variant, one block per stage and narrow (``helpers.SHALLOW``)."""
    return inline_fpn_backbone(variant, out_channels=32, drop_path_rate=0.0, **SHALLOW[variant], **kwargs)


def images(sizes):
    g = torch.Generator().manual_seed(1)
    return [torch.rand(3, *s, generator=g) for s in sizes]


def targets(sizes, masks=False):
    out = []
    for i, (h, w) in enumerate(sizes):
        t = dict(boxes=torch.tensor([[4.0, 6.0, w / 2, h / 2], [w / 3, h / 4, w - 2.0, h - 3.0]]),
                 labels=torch.tensor([1, 2 - i % 2]))
        if masks:
            t['masks'] = torch.zeros(2, h, w, dtype=torch.uint8)
            t['masks'][0, 6:h // 2, 4:w // 2] = 1
            t['masks'][1, h // 4:h - 3, w // 3:w - 2] = 1
        out.append(t)
    return out


def test_the_backbone_gives_what_torchvision_takes():
    bb = backbone('inline_swin_t')
    out = bb(torch.randn(2, 3, 64, 96))
    assert isinstance(out, OrderedDict)
    assert list(out) == ['0', '1', '2', '3', 'pool']
    assert bb.out_channels == 32
    assert [tuple(v.shape) for v in out.values()] == [(2, 32, 16, 24), (2, 32, 8, 12), (2, 32, 4, 6),
                                                      (2, 32, 2, 3), (2, 32, 1, 2)]


@pytest.mark.parametrize(('detector', 'variant'), [(MaskRCNN, 'inline_swin_t'), (FasterRCNN, 'inline_pvt_t'),
                                              (FasterRCNN, 'inline_cswin_t')])
def test_one_training_step_and_eval(detector, variant):
    model = pass_image_sizes(detector(backbone(variant), num_classes=3, **RESIZE))
    sizes = [IMAGE, LARGER[0]]
    model.train()
    losses = model(images(sizes), targets(sizes, masks=detector is MaskRCNN))
    assert ('loss_mask' in losses) == (detector is MaskRCNN)
    assert all(torch.isfinite(v) for v in losses.values()), losses
    sum(losses.values()).backward()
    bad = [n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or
                                                                          not torch.isfinite(p.grad).all())]
    assert not bad
    model.eval()
    with torch.no_grad():
        detections = model(images(sizes))
    assert isinstance(detections, list)
    assert len(detections) == 2
    keys = {'boxes', 'labels', 'scores'} | ({'masks'} if detector is MaskRCNN else set())
    assert all(set(d) == keys and d['boxes'].shape[1] == 4 for d in detections)


@pytest.mark.parametrize('variant', PYRAMIDS)  # a plain backbone's: the simple pyramid's tests below
def test_detections_alone_and_next_to_larger_images_agree(variant):
    model = pass_image_sizes(FasterRCNN(backbone(variant), num_classes=3, box_score_thresh=0.0,
                                        **RESIZE)).eval()
    with torch.no_grad():
        alone = model(images([IMAGE]))[0]
        batched = model(images([IMAGE, *LARGER]))[0]
    assert len(alone['boxes']) > 10
    assert detection_distance(alone, batched) <= 1e-4


def test_without_the_sizes_the_padding_changes_detections():
    model = FasterRCNN(backbone('inline_swin_t'), num_classes=3, box_score_thresh=0.0, **RESIZE).eval()
    with torch.no_grad():
        alone = model(images([IMAGE]))[0]
        batched = model(images([IMAGE, *LARGER]))[0]
    assert detection_distance(alone, batched) > 1e-2


def detection_distance(a, b):
    """Largest over both lists of the distance (box corners, score; inf for another label) to the
    nearest detection in the other: equal-score detections may come in either order."""
    rows = [torch.cat([d['boxes'], d['scores'][:, None], d['labels'][:, None].float() * 1e6], 1) for d in (a, b)]
    if len(rows[0]) != len(rows[1]):
        return float('inf')
    pairwise = (rows[0][:, None] - rows[1][None]).abs().amax(-1)
    return max(pairwise.amin(1).max().item(), pairwise.amin(0).max().item())


@pytest.mark.parametrize('variant', PYRAMIDS)  # a plain backbone's: the simple pyramid's tests below
def test_fpn_levels_do_not_see_the_padding(variant):
    """Every level, 'pool' included, of an image is the same in its own padded tensor and in a
    larger one, with the real size given; without it the padding changes them."""
    bb = backbone(variant).eval()
    image = torch.randn(1, 3, *IMAGE)
    own = torch.nn.functional.pad(image, (0, 56, 0, 32))  # what torchvision makes of it alone: 192 x 256
    big = torch.cat([torch.nn.functional.pad(image, (0, 248, 0, 288)), torch.randn(1, 3, 448, 448)])
    with torch.no_grad():
        a = bb(own, valid_hw=[IMAGE])
        b = bb(big, valid_hw=[IMAGE, (448, 448)])
        plain_a, plain_b = bb(own), bb(big)
    for level in a:
        h, w = a[level].shape[-2:]
        assert (a[level] - b[level][:1, :, :h, :w]).abs().max() < 1e-5, level
    assert (plain_a['0'] - plain_b['0'][:1, :, :48, :64]).abs().max() > 1e-3


def test_sizes_recorded_for_another_tensor_are_not_used():
    bb = backbone('inline_pvt_t').eval()
    x = torch.randn(1, 3, 64, 64)
    bb.record_image_sizes(torch.empty(2, 3, 64, 64), [(32, 32), (64, 64)])
    with torch.no_grad():
        assert torch.equal(bb(x)['0'], bb(x)['0'])
        bb.record_image_sizes(x, [(32, 32)])
        masked = bb(x)['0']
    assert masked[..., 8:, :].abs().max() == 0
    assert masked[..., :8, :8].abs().max() > 0


def test_pass_image_sizes_pads_to_64_and_keeps_the_state_dict_keys():
    plain = FasterRCNN(backbone('inline_pvt_t'), num_classes=2)
    keys = list(plain.state_dict())
    model = pass_image_sizes(plain)
    assert model.transform.size_divisible == 64
    assert 0 < model.rpn.score_thresh < 1e-30
    assert list(model.state_dict()) == keys


def test_pass_image_sizes_needs_our_backbone():
    from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
    with pytest.raises(TypeError, match='InLineFPNBackbone'):
        pass_image_sizes(FasterRCNN(resnet_fpn_backbone(backbone_name='resnet18', weights=None), num_classes=2))


def test_weights_load_an_authors_checkpoint():
    bb = inline_fpn_backbone('inline_swin_t', weights=os.path.join(FIXTURES, 'inline_swin_mini_authors_layout.pth'),
                             embed_dims=16, depths=(2, 2, 4, 2), num_heads=(1, 2, 4, 8), attn_type='IIMS2')
    assert isinstance(bb, InLineFPNBackbone)
    ckpt = torch.load(os.path.join(FIXTURES, 'inline_swin_mini_authors_layout.pth'), weights_only=True)['model']
    assert torch.equal(bb.body.patch_embed.proj.weight, ckpt['patch_embed.proj.weight'])

def test_a_checkpoint_that_does_not_fit_is_reported_in_torchvision_terms():
    with pytest.raises(CheckpointError, match=r"inline_fpn_backbone\(weights=") as info:
        inline_fpn_backbone('inline_swin_t', weights=os.path.join(FIXTURES, 'inline_pvt_mini_authors_layout.pth'),
                            embed_dims=16, depths=(1, 1, 1, 1), num_heads=(1, 2, 4, 8))
    assert 'init_cfg' not in str(info.value)


def test_an_unfit_checkpoint_is_refused_naming_weights_not_init_cfg():
    pvt = os.path.join(FIXTURES, 'inline_pvt_mini_authors_layout.pth')
    with pytest.raises(CheckpointError) as info:
        backbone('inline_swin_t', weights=pvt)
    text = str(info.value)
    assert 'does not fit this backbone' in text
    assert 'init_cfg' not in text
    assert text.endswith("Pass a checkpoint of inline_swin_t as inline_fpn_backbone(weights='/path/to/"
                         "inline_swin_t.pth') (or its URL), or weights=None to train the backbone from scratch.")


def test_a_failed_download_says_what_to_pass_as_weights(no_local_checkpoints, monkeypatch):
    from inline_dense.checkpoint import DownloadError, resolve
    no_network_downloads(monkeypatch)
    with pytest.raises(DownloadError) as info:
        backbone('inline_pvt_t', weights=True)
    text = str(info.value)
    assert "or pass a checkpoint of inline_pvt_t as inline_fpn_backbone(weights='/path/to/inline_pvt_t.pth')" in text
    assert 'init_cfg' not in text
    with pytest.raises(DownloadError, match=r'or pass another checkpoint \(a file') as plain:
        resolve('inline://inline_pvt_t')  # outside inline_fpn_backbone: the torch API's terms
    assert 'init_cfg' not in str(plain.value)
    assert 'inline_fpn_backbone' not in str(plain.value)


@pytest.mark.parametrize('weights', [True, 'imagenet', 'IMAGENET', 'DEFAULT', 'IMAGENET1K_V1'])
def test_weights_names_mean_the_authors_imagenet_file(weights, monkeypatch):
    asked = []
    monkeypatch.setattr(tvd, 'load_pretrained', lambda body, checkpoint, **_: asked.append(checkpoint))
    backbone('inline_pvt_t', weights=weights)
    assert asked == ['inline://inline_pvt_t']


class OurWeights(enum.Enum):
    DEFAULT = 'default'
    OTHER = 'other'


def test_weights_as_an_enum_member(monkeypatch):
    asked = []
    monkeypatch.setattr(tvd, 'load_pretrained', lambda body, checkpoint, **_: asked.append(checkpoint))
    backbone('inline_swin_t', weights=OurWeights.DEFAULT)
    assert asked == ['inline://inline_swin_t']
    with pytest.raises(ValueError, match='another model'):
        backbone('inline_swin_t', weights=OurWeights.OTHER)
    with pytest.raises(ValueError, match='ResNet50_Weights'):
        backbone('inline_swin_t', weights=ResNet50_Weights.DEFAULT)
    assert backbone('inline_swin_t', weights=False).body is not None
    assert len(asked) == 1


@pytest.mark.parametrize(('weights', 'error', 'match'), [
    ('nonsense', FileNotFoundError, "weights='nonsense': it is no weights name"),
    ('missing/backbone.pth', FileNotFoundError, 'no file .*missing/backbone.pth exists'),
    (3, TypeError, r'weights=3 \(int\) is not a weights choice')])
def test_bad_weights_are_refused_in_one_line(weights, error, match):
    with pytest.raises(error, match=match) as info:
        backbone('inline_swin_t', weights=weights)
    assert '\n' not in str(info.value)
    assert 'init_cfg' not in str(info.value)


@pytest.mark.parametrize(('trainable', 'frozen'), [(5, -1), (4, 0), (3, 1), (0, 4)])
def test_trainable_layers_as_torchvision_counts_them(trainable, frozen):
    bb = backbone('inline_swin_t', trainable_layers=trainable)
    assert bb.body.frozen_stages == frozen
    trains = [any(p.requires_grad for p in stage.parameters()) for stage in bb.body.stages]
    assert trains == [i >= frozen for i in range(4)]
    assert all(p.requires_grad for p in bb.fpn.parameters())


def test_bad_options_are_refused():
    for kwargs, match in [(dict(trainable_layers=6), r'trainable_layers=6 must be an int in \[0, 5\]'),
                          (dict(trainable_layers=2, frozen_stages=1), 'not both'),
                          (dict(returned_layers=[0, 1]), r'each entry must be in \[1, 4\]'),
                          (dict(returned_layers=[3, 2]), 'increasing'),
                          (dict(returned_layers=[2], out_indices=(1,)), 'not both')]:
        with pytest.raises(ValueError, match=match):
            backbone('inline_pvt_t', **kwargs)


def test_returned_layers_extra_blocks_and_norm_layer():
    bb = backbone('inline_pvt_t', returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(32, 32),
                  norm_layer=torch.nn.BatchNorm2d)
    out = bb(torch.randn(2, 3, 64, 96))
    assert {k: tuple(v.shape[-2:]) for k, v in out.items()} == {'0': (8, 12), '1': (4, 6), '2': (2, 3),
                                                                 'p6': (1, 2), 'p7': (1, 1)}
    assert bb.level_strides == [8, 16, 32, 64, 128]
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in bb.fpn.modules())
    assert list(backbone('inline_swin_t', returned_layers=[4])(torch.randn(1, 3, 64, 64))) == ['0', 'pool']


def retinanet_backbone(variant='inline_swin_t'):
    return backbone(variant, returned_layers=[2, 3, 4], extra_blocks=LastLevelP6P7(32, 32))


def test_retinanet_detections_alone_and_next_to_larger_images_agree():
    """The head of torchvision's RetinaNet has no batch statistics: its detections of an image
    alone and next to larger images agree once pass_image_sizes drops the padded anchors."""
    anchor_sizes = tuple((x, int(x * 2 ** (1 / 3)), int(x * 2 ** (2 / 3))) for x in (32, 64, 128, 256, 512))
    anchors = AnchorGenerator(anchor_sizes, ((0.5, 1.0, 2.0),) * 5)
    plain = RetinaNet(retinanet_backbone(), 3, anchor_generator=anchors, **RESIZE).eval()
    with torch.no_grad():  # scores spread out (at initialisation all are 0.01: NMS would pick among ties)
        plain.head.classification_head.cls_logits.weight.normal_(0, 0.2, generator=torch.Generator().manual_seed(2))
        plain.head.classification_head.cls_logits.bias.fill_(-1.0)
    with torch.no_grad():
        assert detection_distance(plain(images([IMAGE]))[0], plain(images([IMAGE, *LARGER]))[0]) > 1e-2
    model = pass_image_sizes(plain)
    assert model.transform.size_divisible == 128
    with torch.no_grad():
        alone = model(images([IMAGE]))[0]
        batched = model(images([IMAGE, *LARGER]))[0]
    assert len(alone['boxes']) > 10
    assert detection_distance(alone, batched) <= 1e-4
    model.train()
    losses = model(images([IMAGE, *LARGER]), targets([IMAGE, *LARGER]))
    assert set(losses) == {'classification', 'bbox_regression'}
    assert all(torch.isfinite(v) for v in losses.values())


def test_fcos_and_keypoint_rcnn_run_and_fcos_says_what_stays_padding_dependent():
    with pytest.warns(UserWarning, match='FCOSHead normalises with GroupNorm'):
        fcos = pass_image_sizes(FCOS(retinanet_backbone('inline_pvt_t'), 3, **RESIZE))
    keypoints = pass_image_sizes(KeypointRCNN(backbone('inline_cswin_t'), num_classes=2, **RESIZE))
    for model in (fcos, keypoints):
        model.eval()
        with torch.no_grad():
            out = model(images([IMAGE, *LARGER]))
        assert len(out) == 3
        assert all(d['boxes'].shape[1] == 4 for d in out)
    assert 'keypoints' in out[0]


def test_pass_image_sizes_refuses_what_it_cannot_handle():
    class Other(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = backbone('inline_swin_t')

    with pytest.raises(TypeError, match='Other is not one of the torchvision detectors'):
        pass_image_sizes(Other())

    class MyLevels(ExtraFPNBlock):
        def forward(self, results, x, names):
            return [*results, results[-1][..., ::4, ::4]], [*names, 'p6']

    with pytest.raises(TypeError, match='MyLevels, whose levels\' strides it does not know'):
        pass_image_sizes(FasterRCNN(backbone('inline_swin_t', extra_blocks=MyLevels()), num_classes=2))


def test_scripting_a_detector_is_refused_in_one_line():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', FutureWarning)  # torch 2.14 deprecates torch.jit.script
        with pytest.raises(TypeError,
                           match=r'torch.jit.script of a model on an InLineFPNBackbone is not supported') as info:
            torch.jit.script(pass_image_sizes(FasterRCNN(backbone('inline_swin_t'), num_classes=2)))
    assert '\n' not in str(info.value)


# ----------------------------------------------------------------------------- a plain backbone (InLine-DeiT)
def plain_backbone(**kwargs):
    torch.manual_seed(0)
    return inline_fpn_backbone('inline_deit_t', out_channels=32, embed_dims=16, depth=2, num_heads=2,
                               drop_path_rate=0.0, **kwargs)


def test_a_plain_backbone_gets_the_simple_pyramid():
    bb = plain_backbone()
    assert isinstance(bb, tvd.InLinePlainPyramidBackbone)
    assert bb.body.out_indices == [1]
    out = bb(torch.randn(2, 3, 80, 112))  # a 5 x 7 grid at stride 16: odd on both sides
    assert list(out) == ['0', '1', '2', '3', 'pool']
    assert [tuple(v.shape) for v in out.values()] == [(2, 32, 20, 28), (2, 32, 10, 14), (2, 32, 5, 7),
                                                      (2, 32, 3, 4), (2, 32, 2, 2)]
    with pytest.raises(ValueError, match='leave extra_blocks out'):
        plain_backbone(extra_blocks=LastLevelP6P7(32, 32))


def test_mask_rcnn_on_a_plain_backbone_trains_a_step_and_predicts():
    model = pass_image_sizes(MaskRCNN(plain_backbone(), num_classes=3, box_score_thresh=0.0, **RESIZE))
    sizes = [IMAGE, LARGER[0]]
    losses = model(images(sizes), targets(sizes, masks=True))
    assert 'loss_mask' in losses, losses
    assert all(torch.isfinite(v) for v in losses.values()), losses
    sum(losses.values()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in model.backbone.parameters() if p.requires_grad)
    model.eval()
    with torch.no_grad():
        alone = model(images([IMAGE]))[0]
        batched = model(images([IMAGE, *LARGER]))[0]
    assert set(alone) == {'boxes', 'labels', 'scores', 'masks'}
    assert len(alone['boxes']) > 10
    assert detection_distance(alone, batched) <= 1e-4


def test_simple_pyramid_levels_do_not_see_the_padding():
    bb = plain_backbone().eval()
    image = torch.randn(1, 3, *IMAGE)
    own = torch.nn.functional.pad(image, (0, 56, 0, 32))
    big = torch.cat([torch.nn.functional.pad(image, (0, 248, 0, 288)), torch.randn(1, 3, 448, 448)])
    with torch.no_grad():
        a, b = bb(own, valid_hw=[IMAGE]), bb(big, valid_hw=[IMAGE, (448, 448)])
        plain_a, plain_b = bb(own), bb(big)
    for level in a:
        h, w = a[level].shape[-2:]
        assert (a[level] - b[level][:1, :, :h, :w]).abs().max() < 1e-5, level
    assert (plain_a['0'] - plain_b['0'][:1, :, :48, :64]).abs().max() > 1e-3
