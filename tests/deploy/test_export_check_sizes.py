"""tools/export_onnx.py checks at sizes consistent with the ones it says the graph is valid for, names
every output, and reports an onnxruntime failure in one line.

DINO exported from a 2x3x65x97 example held for heights and widths up to 128 only (a branch taken
for the small example), yet the check ran at its default sizes (up to 409) and ended in an
onnxruntime ``GatherND`` traceback; its log named 2 of its 4 outputs (mmdet's ChannelMapper adds
levels its config's ``num_outs`` is not read for)."""
import os
import subprocess
import sys
from pathlib import Path

import onnxruntime  # noqa: F401  (the setup installs it; missing, these tests fail)
import pytest
from torch import nn

from inline_dense.deploy import (
    CHECK_SHAPES,
    OnnxMismatchError,
    check_onnx,
    deployable,
    export_onnx,
    fit_check_shapes,
    output_names,
    outside_ranges,
)

ROOT = Path(__file__).resolve().parents[2]
DINO = str(ROOT / 'configs' / 'toy' / 'dino-4scale_inline-swin-mini_toy-coco.py')
DEIT = str(ROOT / 'configs' / 'toy' / 'mask-rcnn_inline-deit-mini_simple-fpn_toy-coco.py')
BOUNDED = {'batch': (2, None), 'height': (2, 128), 'width': (2, 128)}


def test_default_check_sizes_are_moved_inside_the_valid_range():
    export = (2, 3, 65, 97)
    fitted = fit_check_shapes(CHECK_SHAPES, BOUNDED, export)
    assert fitted
    assert not outside_ranges(fitted, BOUNDED)
    assert export not in fitted
    assert len(set(fitted)) == len(fitted) == len(CHECK_SHAPES)
    assert fit_check_shapes(CHECK_SHAPES, {'batch': (2, None), 'height': (2, None), 'width': (2, None)},
                            (2, 3, 289, 291)) == list(CHECK_SHAPES)  # unbounded: the defaults as they are


def test_the_printed_ranges_are_the_ones_checked():
    """torch.export's symbolic batch starts at 2 (it specialises 0 and 1); the checks run batch 1, so the
    printed range says 1, not '2..any'."""
    from inline_dense.deploy.onnx_export import format_ranges
    assert format_ranges(BOUNDED) == 'batch 1..any, height 1..128, width 1..128'
    assert format_ranges({'batch': (2, None), 'height': (33, None), 'width': (2, 64)}) == \
        'batch 1..any, height 33..any, width 1..64'
    assert any(shape[0] == 1 for shape in fit_check_shapes(CHECK_SHAPES, BOUNDED, (2, 3, 65, 97)))


@pytest.mark.slow
def test_the_deit_detector_says_batch_1_and_checks_it(tmp_path):
    out = tmp_path / 'deit.onnx'
    proc = subprocess.run([sys.executable, str(ROOT / 'tools' / 'export_onnx.py'), DEIT, '--out', str(out),
                           '--export-shape', '2x3x97x113', '--check-shapes', '1x3x81x95', '2x3x70x66', '--runs', '1'],
                          capture_output=True, text=True, timeout=1200, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert '[export] valid input sizes: batch 1..any, ' in proc.stdout
    assert '1x3x81x95' in proc.stdout


def test_sizes_outside_the_range_are_named():
    ranges = dict(BOUNDED, height=(33, 128))
    assert outside_ranges([(1, 3, 333, 445), (1, 3, 100, 120), (2, 3, 20, 64)], ranges) == [(1, 3, 333, 445),
                                                                                           (2, 3, 20, 64)]


class Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, 2, 1)

    def forward(self, x):
        return self.conv(x)


def test_an_onnxruntime_failure_is_one_line(tmp_path):
    path = str(tmp_path / 'conv.onnx')
    export_onnx(Conv(), path, ['out'], (2, 3, 33, 35))
    with pytest.raises(OnnxMismatchError, match=r'onnxruntime failed at input \(1, 5, 40, 40\)') as info:
        check_onnx(path, nn.Sequential(), [(1, 5, 40, 40)], runs=1)  # 5 channels: the graph wants 3
    assert len(str(info.value).splitlines()) == 1
    assert info.value.shape == (1, 5, 40, 40)


def test_dino_outputs_are_all_named():
    module, task, names = deployable(DINO)
    assert task == 'detection'
    assert output_names(module, names, (2, 3, 65, 97)) == ['feat0', 'feat1', 'feat2', 'feat3']


@pytest.mark.slow
def test_dino_from_a_small_example_checks_inside_its_range(tmp_path):
    out = tmp_path / 'dino.onnx'
    proc = subprocess.run([sys.executable, str(ROOT / 'tools' / 'export_onnx.py'), DINO, '--out', str(out),
                           '--export-shape', '2x3x65x97', '--runs', '1'], capture_output=True, text=True, timeout=1200,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    assert 'outputs: feat0, feat1, feat2, feat3' in proc.stdout
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
