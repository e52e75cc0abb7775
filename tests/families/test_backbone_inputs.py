"""What users really feed the backbones: an empty batch, an image with a zero side, valid_hw that is not whole
pixels, float16 / bfloat16 / uint8 images, a long thin picture whose resized side falls below the total stride
(padded inside, the padding masked), out-of-range drop_path_rate, an int split_size, a detector checkpoint
through ``Pretrained(prefix='backbone.')``, and a missing file's hint naming the right family."""
from pathlib import Path

import pytest
import torch

from helpers import build_tiny
from inline_dense.checkpoint import CheckpointError

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures('one_thread')


def expected_shapes(model, batch, h, w):
    return [(batch, model.embed_dims[i], -(-h // model.strides[i]), -(-w // model.strides[i]))
            for i in model.out_indices]


def test_an_empty_batch_gives_empty_outputs(kind):
    model = build_tiny(kind).eval()
    outs = model(torch.zeros(0, 3, 64, 96))
    assert [tuple(o.shape) for o in outs] == expected_shapes(model, 0, 64, 96)
    maps, prefixes = model.forward_with_prefix(torch.zeros(0, 3, 64, 96))  # what a classifier head reads
    assert [tuple(o.shape) for o in maps] == expected_shapes(model, 0, 64, 96)
    assert [tuple(p.shape) for p in prefixes] == [(0, model.num_prefix_tokens, model.embed_dims[i])
                                                  for i in model.out_indices]


@pytest.mark.parametrize('hw', [(0, 32), (32, 0), (0, 0)])
def test_an_image_with_a_zero_side_is_refused_in_one_line(kind, hw):
    """Checked with the other inputs, not left to torch's interpolate (every family; an empty batch is fine)."""
    model = build_tiny(kind).eval()
    for call in (model, model.forward_with_prefix):
        with pytest.raises(ValueError, match=rf'got an input of {hw[0]}x{hw[1]} pixels .*at least one pixel') as info:
            call(torch.zeros(1, 3, *hw))
        assert '\n' not in str(info.value)


@pytest.mark.parametrize('valid_hw', [[(32.0, 32)], [(32, 31.5)], [(True, 32)], [('32', 32)],
                                      [(torch.tensor(32.0), 32)]])
def test_valid_hw_that_is_not_whole_pixels_is_refused_in_one_line(kind, valid_hw):
    model = build_tiny(kind).eval()
    with pytest.raises(TypeError, match=r'valid_hw=.* must hold whole numbers of pixels \(ints\), got') as info:
        model(torch.zeros(1, 3, 32, 32), valid_hw)
    assert '\n' not in str(info.value)


def test_valid_hw_takes_numpy_and_tensor_ints(kind):
    import numpy as np
    model = build_tiny(kind).eval()
    x = torch.randn(1, 3, 32, 48)
    with torch.no_grad():
        ref = model(x, [(24, 40)])
        for sizes in ([(np.int64(24), np.int32(40))], [(torch.tensor(24), torch.tensor(40))]):
            for a, b in zip(model(x, sizes), ref):
                torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize('dtype', [torch.float16, torch.bfloat16])
def test_other_float_dtypes_are_cast_to_the_models(kind, dtype):
    model = build_tiny(kind).eval()
    x = torch.randn(1, 3, 64, 64).to(dtype)
    with torch.no_grad():
        for got, want in zip(model(x), model(x.float())):
            assert got.dtype == torch.float32
            torch.testing.assert_close(got, want)


def test_integer_images_are_refused_with_the_fix():
    with pytest.raises(TypeError, match=r'InLineSwin: got a torch.uint8 input.*normalised floating-point'):
        build_tiny('swin')(torch.zeros(1, 3, 64, 64, dtype=torch.uint8))


def test_a_side_below_the_total_stride_is_padded_and_masked(kind):
    """A 20x70 image alone gives what it gives padded in a batch with a larger image (masked)."""
    model = build_tiny(kind).eval()
    torch.manual_seed(0)
    small = torch.randn(1, 3, 20, 70)
    with torch.no_grad():
        alone = model(small)
        batch = torch.zeros(2, 3, 64, 70)
        batch[0, :, :20] = small[0]
        batch[1] = torch.randn(3, 64, 70)
        batched = model(batch, valid_hw=[(20, 70), (64, 70)])
    assert [tuple(o.shape) for o in alone] == expected_shapes(model, 1, 20, 70)
    for a, b in zip(alone, batched):
        torch.testing.assert_close(a[0], b[0, :, :a.shape[-2], :a.shape[-1]], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize('rate', [1.5, -0.5, 1.0])
def test_out_of_range_drop_path_rate_is_refused_at_construction(kind, rate):
    with pytest.raises(ValueError, match=rf'drop_path_rate={rate} must be in \[0, 1\)'):
        build_tiny(kind, init=False, drop_path_rate=rate)


def test_an_int_split_size_means_every_stage():
    torch.manual_seed(0)
    model = build_tiny('cswin', split_size=2)
    torch.manual_seed(0)
    same = build_tiny('cswin', split_size=(2, 2, 2, 2))
    assert model.arch['split_size'] == (2, 2, 2, 2)
    x = torch.randn(1, 3, 64, 64)
    with torch.no_grad():
        for a, b in zip(model.eval()(x), same.eval()(x)):
            torch.testing.assert_close(a, b)


def test_the_missing_file_hint_names_the_familys_variant(kind, tmp_path):
    model = build_tiny(kind, init=False, init_cfg=dict(type='Pretrained', checkpoint=str(tmp_path / 'none.pth')))
    with pytest.raises(FileNotFoundError) as info:
        model.init_weights()
    assert f"'inline://inline_{kind}_t'" in str(info.value)
    assert kind == 'swin' or 'inline_swin_t' not in str(info.value)


def test_pretrained_prefix_takes_the_backbone_out_of_a_detector_checkpoint(kind, tmp_path):
    source = build_tiny(kind)
    detector = {f'backbone.{k}': v for k, v in source.state_dict().items()}
    detector['neck.lateral.weight'] = torch.zeros(4, 4)
    path = tmp_path / 'detector.pth'
    torch.save({'state_dict': detector, 'meta': {}}, path)
    model = build_tiny(kind, init=False, init_cfg=dict(type='Pretrained', checkpoint=str(path), prefix='backbone.'))
    model.init_weights()
    for k, v in source.state_dict().items():
        assert torch.equal(model.state_dict()[k], v), k
    wrong = build_tiny(kind, init=False, init_cfg=dict(type='Pretrained', checkpoint=str(path), prefix='model'))
    with pytest.raises(CheckpointError, match=r"no weights under prefix='model\.'.*'backbone\.'"):
        wrong.init_weights()
