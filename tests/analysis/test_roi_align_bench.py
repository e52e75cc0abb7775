"""The RoIAlign gradient benchmark (inline_dense.analysis.roi_align): its calls follow mmdet's level
rule, and a small run prints one row per layout with both implementations agreeing."""
import math
import subprocess
import sys

import torch

from inline_dense.analysis import roi_align


def test_each_box_goes_to_the_level_of_its_scale():
    calls = roi_align.level_calls('bbox', 800, 1333, batch=2, channels=4)
    assert sum(call[1].shape[0] for call in calls) == 2 * 512
    for grad, rois, scale, shape in calls:
        stride = round(1 / scale)
        level = roi_align.STRIDES.index(stride)
        side = ((rois[:, 3] - rois[:, 1]) * (rois[:, 4] - rois[:, 2])).sqrt()
        low = 0.0 if level == 0 else 56 * 2 ** level
        high = math.inf if level == len(roi_align.STRIDES) - 1 else 56 * 2 ** (level + 1)
        assert bool(((side >= low * (1 - 1e-4)) & (side < high * (1 + 1e-4))).all()), stride
        assert shape == (2, 4, math.ceil(800 / stride), math.ceil(1333 / stride))
        assert grad.shape == (rois.shape[0], 4, 7, 7)
        assert bool((rois[:, 3] <= 1333 + 1e-3).all() and (rois[:, 4] <= 800 + 1e-3).all())


def test_a_small_run_prints_a_row_per_layout_with_the_same_sums():
    threads = torch.get_num_threads()
    try:
        rows = roi_align.main(['--height', '160', '--width', '224', '--channels', '8', '--rounds', '1'])
    finally:
        torch.set_num_threads(threads)
    assert [row['layout'] for row in rows] == ['bbox', 'mask']
    assert all(row['equal'] and row['stand-in_cpu_s'] > 0 and row['torchvision_cpu_s'] > 0 for row in rows)


def test_the_command_line_names_both_implementations():
    out = subprocess.run([sys.executable, '-m', 'inline_dense.analysis.roi_align', '--layout', 'mask', '--height',
                          '96', '--width', '128', '--channels', '4', '--rounds', '1'],
                         capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert len(lines) == 2, out
    assert lines[1].startswith(' mask: boxes per level'), out
    assert 'torchvision' in lines[1], out
    assert 'stand-in' in lines[1], out
    assert lines[1].endswith('the same sums'), out
