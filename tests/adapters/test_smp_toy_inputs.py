"""tools/train_smp_toy.py (and inline_dense.smp_toy.train_toy) refuse settings and data they cannot
use in one line, before training: a time budget or learning rate that is not a finite number > 0,
a batch of fewer than 2, an unknown decoder or variant, a missing annotation, pictures of another
size, fewer than 2 training images."""
import os
import re

import pytest

pytest.importorskip('segmentation_models_pytorch')

import cv2
import numpy as np

from inline_dense.smp_toy import ToyRunError, train_toy
from inline_dense.toy_data import make_toy_ade


def refusal(load_tool, *args):
    """The one-line message the tool exits with for ``args``."""
    with pytest.raises(SystemExit) as info:
        load_tool('train_smp_toy').main(list(args))
    message = str(info.value.code)
    assert message.startswith('error: '), message
    assert '\n' not in message, message
    return message


@pytest.fixture
def toy(tmp_path):
    return make_toy_ade(str(tmp_path / 'toy_ade'), num_train=4, num_val=2, image_size=64)


@pytest.mark.parametrize(('args', 'match'), [
    (['--seconds', '-1'], r"training time -1.0 s must be a finite number of seconds > 0"),
    (['--seconds', 'nan'], r"training time nan s must be a finite"),
    (['--seconds', '0'], r"training time 0.0 s must be"),
    (['--seconds', 'inf'], r"training time inf s must be a finite"),
    (['--lr', '-0.001'], r"learning rate -0.001 must be a finite number > 0"),
    (['--batch-size', '0'], r"batch size 0 must be an integer >= 2: smp's decoders normalise with BatchNorm"),
    (['--batch-size', '1'], r"batch size 1 must be an integer >= 2"),
    (['--decoder', 'UperNet'], r"unknown decoder 'UperNet'; smp has .*UPerNet"),
    (['--variant', 'inline_swin_x'], r"unknown InLine variant 'inline_swin_x'; use one of"),
    (['--decoder', 'DeepLabV3'], r"smp.DeepLabV3 on inline_swin_t: .*output stride"),
])
def test_bad_settings_are_refused_in_one_line(load_tool, toy, args, match):
    assert re.search(match, refusal(load_tool, '--root', toy, *args))


def test_one_training_image_is_refused(load_tool, tmp_path):
    root = make_toy_ade(str(tmp_path / 'one'), num_train=1, num_val=2, image_size=64)
    assert 'holds 1 image: a training step needs 2' in refusal(load_tool, '--root', root, '--seconds', '1')


def test_a_missing_annotation_is_refused(load_tool, toy):
    os.remove(os.path.join(toy, 'annotations', 'training', sorted(os.listdir(os.path.join(toy, 'annotations',
                                                                                           'training')))[1]))
    assert 'is missing: every image needs its annotation' in refusal(load_tool, '--root', toy, '--seconds', '1')


def test_an_image_of_another_size_is_refused(load_tool, toy):
    images = os.path.join(toy, 'images', 'training')
    cv2.imwrite(os.path.join(images, sorted(os.listdir(images))[2]), np.zeros((48, 64, 3), np.uint8))
    message = refusal(load_tool, '--root', toy, '--seconds', '1')
    assert 'is 48x64 with a 64x64 annotation' in message
    assert 'must be 64x64' in message


def test_train_toy_raises_the_same_for_library_callers(toy):
    with pytest.raises(ToyRunError, match='batch size 1'):
        train_toy(toy, batch_size=1)
    with pytest.raises(ToyRunError, match='max_epochs=0'):
        train_toy(toy, max_epochs=0)
