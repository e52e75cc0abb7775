"""mmcv's ops in this environment (mmcv-lite + inline_dense's stand-in for the compiled ``mmcv._ext``).

Against what compiled mmcv 2.1.0 returns (tests/data/fixtures/mmcv_ops_reference.pt: 64 roi_align
cases with gradients, 24 nms / batched_nms cases), against mmdet's pure-torch focal loss, and
against values worked out by hand. Also: where ``mmcv._ext`` comes from, and what an op without
a stand-in says.
"""
import os
import subprocess
import sys
import zipfile
from collections import defaultdict
from pathlib import Path

import pytest
import torch
from torch.torch_version import TorchVersion

import inline_dense.openmmlab  # noqa: F401  (the stand-in is found without it too; see test_stock_entry_points...)

ROOT = Path(__file__).resolve().parents[2]
with torch.serialization.safe_globals([TorchVersion]):
    REFERENCE = torch.load(ROOT / 'tests' / 'data' / 'fixtures' / 'mmcv_ops_reference.pt', weights_only=True)
DEVICES = ['cpu'] + (['cuda'] if torch.cuda.is_available() else [])


def _stand_in() -> bool:
    from inline_dense.openmmlab.mmcv_ops import uses_stand_in
    return uses_stand_in()


# What only the stand-in does (compiled mmcv has no CPU focal loss, no bfloat16 kernels and all its ops).
stand_in_only = pytest.mark.skipif(not _stand_in(), reason='a test of the mmcv-lite stand-in; compiled mmcv here')


def test_mmcv_without_ops_uses_the_stand_in_and_compiled_mmcv_its_own_ops():
    """Whichever distribution provides ``mmcv`` (mmcv-lite, onedl-mmcv built without ops, or a
    compiled mmcv): the stand-in serves exactly when it ships no compiled ``mmcv._ext``."""
    import importlib.metadata

    import mmcv

    from inline_dense.openmmlab.mmcv_ops import mmcv_ext, uses_stand_in
    from inline_dense_dev import uvlock
    dist, = set(importlib.metadata.packages_distributions()['mmcv'])
    compiled = any(f.name.startswith('_ext') and f.suffix == '.so' for f in importlib.metadata.files(dist) or ())
    # MMCV=full compiles mmcv of the version the lock pins for mmcv-lite
    locked = uvlock.package('mmcv-lite' if dist == 'mmcv' else dist).version
    assert mmcv.__version__ == locked, f'{dist} is not the version uv.lock pins'
    if compiled:
        assert not uses_stand_in(), f'mmcv._ext is {mmcv_ext()}, but {dist} has compiled ops'
    else:
        assert uses_stand_in(), f'mmcv._ext is {mmcv_ext()}: {dist} has no compiled ops, it should be the stand-in'


# Each case as called, and each avg case once more on CPU with the stand-in's gradient forced through
# its vector path (these small calls would otherwise go to torchvision's loop).
ROI_ALIGN_CASES = ([pytest.param(i, device, False, id=f'{i}-{device}') for i in range(len(REFERENCE['roi_align']))
                    for device in DEVICES]
                   + [pytest.param(i, 'cpu', True, id=f'{i}-cpu-vector-grad')
                      for i, case in enumerate(REFERENCE['roi_align']) if case['pool_mode'] == 'avg'])


@pytest.mark.parametrize(('index', 'device', 'vector_grad'), ROI_ALIGN_CASES)
def test_roi_align_matches_compiled_mmcv(index, device, vector_grad, monkeypatch):
    from mmcv.ops import roi_align
    case = REFERENCE['roi_align'][index]
    if vector_grad:
        from inline_dense.ops import roi_align_avg_grad
        monkeypatch.setattr(roi_align_avg_grad, 'MIN_VECTOR_OUTPUTS', 0)
    feats = REFERENCE['feats'][case['feat']].to(device, copy=True).requires_grad_(True)
    out = roi_align(feats, case['rois'].to(device), case['output_size'], case['spatial_scale'],
                    case['sampling_ratio'], case['pool_mode'], case['aligned'])
    out.backward(case['grad_out'].to(device))
    torch.testing.assert_close(out.cpu(), case['out'], rtol=0, atol=1e-6)
    torch.testing.assert_close(feats.grad.cpu(), case['grad_feat'], rtol=0, atol=1e-6)


def assert_same_keep_up_to_ties(keep: torch.Tensor, dets: torch.Tensor, case: dict) -> None:
    """The same kept boxes in the same order, except that boxes of equal score may swap."""
    want_keep, want_dets = case['keep'], case['dets']
    assert keep.shape == want_keep.shape, (keep.tolist(), want_keep.tolist())
    torch.testing.assert_close(dets[:, 4], want_dets[:, 4], rtol=0, atol=0)  # scores in the same order
    groups, want_groups = defaultdict(set), defaultdict(set)
    for k, w, score in zip(keep.tolist(), want_keep.tolist(), dets[:, 4].tolist()):
        groups[score].add(k)
        want_groups[score].add(w)
    assert groups == want_groups
    by_index = dict(zip(keep.tolist(), dets))
    for k, row in zip(want_keep.tolist(), want_dets):
        torch.testing.assert_close(by_index[k], row, rtol=0, atol=0)


@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('index', range(len(REFERENCE['nms'])))
def test_nms_matches_compiled_mmcv(index, device):
    from mmcv.ops import batched_nms, nms
    case = REFERENCE['nms'][index]
    boxes, scores = case['boxes'].to(device), case['scores'].to(device)
    if case['kind'] == 'nms':
        dets, keep = nms(boxes, scores, case['iou_threshold'])
    else:
        dets, keep = batched_nms(boxes, scores, case['labels'].to(device), dict(case['nms_cfg']))
    assert_same_keep_up_to_ties(keep.cpu(), dets.cpu(), case)


def test_nms_legacy_offset_and_known_boxes():
    from mmcv.ops import nms
    boxes = torch.tensor([[0., 0., 10., 10.],
                          [1., 1., 11., 11.],     # IoU with box 0: 81 / (100 + 100 - 81) = 0.681
                          [20., 20., 30., 30.],   # disjoint from all others
                          [0., 0., 10., 10.5]])   # IoU with box 0: 100 / 105 = 0.952
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6])
    dets, keep = nms(boxes, scores, iou_threshold=0.5)
    assert keep.tolist() == [0, 2]
    torch.testing.assert_close(dets, torch.tensor([[0., 0., 10., 10., 0.9], [20., 20., 30., 30., 0.7]]))
    assert nms(boxes, scores, iou_threshold=0.7)[1].tolist() == [0, 1, 2]
    # offset=1 (boxes 1 pixel larger each way): IoU(0, 1) = 100 / (121 + 121 - 100) = 0.704 > 0.7.
    assert nms(boxes, scores, iou_threshold=0.7, offset=1)[1].tolist() == [0, 2]


def _ramp_features() -> torch.Tensor:
    """(1, 2, 4, 4): channel 0 is f(x, y) = x + 4y at pixel (x, y), channel 1 is 3. Bilinear
    sampling reproduces a linear function, so an average-pooled bin equals f at its centre."""
    ys, xs = torch.meshgrid(torch.arange(4.), torch.arange(4.), indexing='ij')
    return torch.stack([xs + 4 * ys, torch.full((4, 4), 3.)])[None]


def test_roi_align_known_values_and_gradient():
    from mmcv.ops import RoIAlign
    feats = _ramp_features().requires_grad_(True)
    rois = torch.tensor([[0., 1., 1., 3., 3.]])
    # aligned=True: the RoI spans 0.5..2.5, bin centres 1.0 and 2.0 -> f = cx + 4 cy.
    out = RoIAlign((2, 2), spatial_scale=1.0, sampling_ratio=2, aligned=True)(feats, rois)
    torch.testing.assert_close(out[0, 0], torch.tensor([[5., 6.], [9., 10.]]))
    torch.testing.assert_close(out[0, 1], torch.full((2, 2), 3.))
    out.sum().backward()
    # Samples at 0.75, 1.25, 1.75, 2.25 per axis: pixel p collects S(p) = 0.25, 1.75, 1.75, 0.25,
    # and d out.sum() / d feats[y, x] = S(y) S(x) / 4.
    s = torch.tensor([0.25, 1.75, 1.75, 0.25])
    torch.testing.assert_close(feats.grad[0, 0], torch.outer(s, s) / 4)
    # aligned=False: the RoI spans 1..3, bin centres 1.5 and 2.5.
    out = RoIAlign((2, 2), spatial_scale=1.0, sampling_ratio=2, aligned=False)(feats, rois)
    torch.testing.assert_close(out[0, 0], torch.tensor([[7.5, 8.5], [11.5, 12.5]]))
    # max mode: the largest sample of a bin; f grows with x and y, so the bottom-right sample wins:
    # bin (0, 0) samples at 0.75 and 1.25 -> f(1.25, 1.25) = 6.25.
    out = RoIAlign((2, 2), spatial_scale=1.0, sampling_ratio=2, pool_mode='max', aligned=True)(feats, rois)
    torch.testing.assert_close(out[0, 0], torch.tensor([[6.25, 7.25], [10.25, 11.25]]))


@stand_in_only
@pytest.mark.parametrize('device', DEVICES)
@pytest.mark.parametrize('weighted', [False, True])
def test_sigmoid_focal_loss_matches_mmdet_pure_torch(weighted, device):
    from mmdet.models.losses.focal_loss import py_sigmoid_focal_loss, sigmoid_focal_loss
    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(64, 5, generator=gen) * 4).to(device)
    target = torch.randint(0, 6, (64,), generator=gen).to(device)  # 5 = background
    weight = torch.rand(64, generator=gen).to(device) if weighted else None
    one_hot = torch.nn.functional.one_hot(target, 6)[:, :5].to(logits.dtype)
    a, b = logits.clone().requires_grad_(True), logits.clone().requires_grad_(True)
    ours = sigmoid_focal_loss(a, target, weight, gamma=2.0, alpha=0.25, reduction='mean', avg_factor=None)
    ref = py_sigmoid_focal_loss(b, one_hot, weight, gamma=2.0, alpha=0.25, reduction='mean', avg_factor=None)
    ours.backward()
    ref.backward()
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-7)


@stand_in_only
def test_softmax_focal_loss_matches_its_formula():
    from mmcv.ops import softmax_focal_loss
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(16, 4, generator=gen, requires_grad=True)
    target = torch.randint(0, 4, (16,), generator=gen)
    loss = softmax_focal_loss(logits, target, 2.0, 0.25, None, 'sum')
    ref_logits = logits.detach().clone().requires_grad_(True)
    log_pt = torch.log_softmax(ref_logits, 1).gather(1, target[:, None]).squeeze(1)
    ref = (-0.25 * (1 - log_pt.exp()) ** 2 * log_pt).sum()
    loss.backward()
    ref.backward()
    torch.testing.assert_close(loss, ref)
    torch.testing.assert_close(logits.grad, ref_logits.grad)


@stand_in_only
def test_an_op_without_a_stand_in_says_which_and_how_to_get_it():
    from mmcv.ops import box_iou_rotated

    from inline_dense.openmmlab.mmcv_ops import mmcv_ext
    with pytest.raises(mmcv_ext().MissingCompiledOpError, match=r"'box_iou_rotated'.*MMCV=full"):
        box_iou_rotated(torch.rand(2, 5), torch.rand(2, 5))


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env=dict(os.environ, **env), cwd=ROOT / 'tests')


@stand_in_only
def test_stock_entry_points_import_without_importing_inline_dense():
    proc = run_python('import sys\n'
                      'from mmdet.apis import DetInferencer\n'
                      'from mmseg.apis import MMSegInferencer\n'
                      'import mmcv._ext as ext\n'
                      "registering = [m for m in sys.modules\n"
                      "               if m.startswith(('inline_dense.openmmlab', 'inline_dense.models'))]\n"
                      "assert not registering, registering\n"
                      'assert ext.IS_STAND_IN\n')
    assert proc.returncode == 0, proc.stderr


# How mmcv._ext is first reached in a fresh interpreter: mmcv.ops imports it while mmdet or mmseg are
# half imported, or while inline_dense.openmmlab registers; the last one installs the hook by hand.
FIRST_IMPORTS = {
    'mmdet': 'from mmdet.apis import DetInferencer',
    'mmseg': 'from mmseg.apis import MMSegInferencer',
    'mmdet-dino': 'import mmdet.models.layers.transformer.deformable_detr_layers',
    'inline_dense.openmmlab': 'import inline_dense.openmmlab',
    'hook': ('import sys\n'
             "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != 'MmcvExtFinder']\n"
             'import inline_dense_mmcv_hook\n'
             'inline_dense_mmcv_hook.install()\n'
             'import mmcv.ops'),
}


@stand_in_only
@pytest.mark.parametrize('first', FIRST_IMPORTS)
def test_each_op_family_is_served_whichever_import_reaches_mmcv_ext_first(first):
    """ext.py imports its sibling op modules while mmcv.ops (and mmdet or mmseg) are half imported:
    each entry point gets the stand-in with all four op families, and the deformable attention runs."""
    proc = run_python(FIRST_IMPORTS[first] + '\n'
                      'import sys, torch, mmcv._ext\n'
                      'import inline_dense.ops.ext as ext\n'
                      'assert mmcv._ext is ext, mmcv._ext\n'
                      "for family in ('nms', 'roi_align', 'focal_loss', 'ms_deform_attn', 'checks'):\n"
                      "    assert f'inline_dense.ops.{family}' in sys.modules, family\n"
                      'from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction as F\n'
                      'value = torch.randn(1, 5, 1, 2, requires_grad=True)\n'
                      'shapes, start = torch.tensor([[2, 2], [1, 1]]), torch.tensor([0, 4])\n'
                      'loc, weights = torch.rand(1, 3, 1, 2, 1, 2), torch.rand(1, 3, 1, 2, 1)\n'
                      'out = F.apply(value, shapes, start, loc, weights, 64)\n'
                      'out.sum().backward()\n'
                      "assert ext.CALLS['ms_deform_attn_forward'] == ext.CALLS['ms_deform_attn_backward'] == 1\n"
                      "assert ext.nms(torch.tensor([[0., 0, 1, 1]]), torch.ones(1), 0.5).tolist() == [0]\n")
    assert proc.returncode == 0, proc.stderr


@stand_in_only
def test_mmcv_ext_is_the_stand_in_module_and_has_only_the_names_mmcv_asks_for():
    proc = run_python('import mmcv._ext, inline_dense.ops.ext as ext, mmcv.ops\n'
                      'assert mmcv._ext is ext, (mmcv._ext, ext)\n'
                      "assert not hasattr(mmcv._ext, 'no_such_op')\n"
                      "assert 'deform_conv_forward' in ext.mmcv_op_names()\n"
                      'try:\n'
                      '    mmcv._ext.deform_conv_forward()\n'
                      'except ext.MissingCompiledOpError as e:\n'
                      "    assert 'MMCV=full' in str(e)\n"
                      'else:\n'
                      "    raise SystemExit('an unserved op ran')\n")
    assert proc.returncode == 0, proc.stderr


def test_a_compiled_extension_wins_and_the_stand_in_can_be_turned_off(tmp_path):
    import mmcv
    # A copy of mmcv with a "compiled" _ext in it: the regular path finder finds it first.
    fake = tmp_path / 'site'
    (fake / 'mmcv').mkdir(parents=True)
    (fake / 'mmcv' / '__init__.py').write_text(f'__path__.append({os.path.dirname(mmcv.__file__)!r})\n')
    (fake / 'mmcv' / '_ext.py').write_text('COMPILED = True\n')
    proc = run_python('import mmcv._ext as e; print(getattr(e, "COMPILED", False), getattr(e, "IS_STAND_IN", False))',
                      PYTHONPATH=str(fake))
    assert proc.stdout.split() == ['True', 'False'], proc.stderr
    if _stand_in():  # with compiled mmcv installed, there is nothing to turn off
        proc = run_python('import mmcv._ext', INLINE_DENSE_MMCV_EXT='0')
        assert 'ModuleNotFoundError' in proc.stderr


@pytest.mark.slow
def test_the_wheel_puts_the_hook_into_site_packages(tmp_path):
    """``pip install .`` gets the .pth at the wheel's root (site-packages), with the hook module."""
    proc = subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '--no-build-isolation', '-w',
                           str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    wheel, = tmp_path.glob('inline_dense-*.whl')
    names = zipfile.ZipFile(wheel).namelist()
    assert {'inline_dense_mmcv_hook.pth', 'inline_dense_mmcv_hook.py', 'inline_dense/ops/ext.py'} <= set(names)
    pth = zipfile.ZipFile(wheel).read('inline_dense_mmcv_hook.pth').decode()
    assert pth == (ROOT / 'inline_dense_mmcv_hook.pth').read_text()
    requires = [line for line in zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith('METADATA'))).decode().splitlines() if line.startswith('Requires-Dist')]
    assert not [r for r in requires if r.split()[1] == 'mmcv' and 'extra' not in r], requires


@stand_in_only
@pytest.mark.parametrize('pool_mode', ['avg', 'max'])
def test_bfloat16_runs_in_float32(pool_mode):
    """torchvision has no bfloat16 kernels (and no float16 ones on CPU): autocast's bfloat16
    features are pooled in float32, so AMP runs two-stage detectors; the result is the float32 one,
    rounded."""
    from mmcv.ops import nms, roi_align
    case = next(c for c in REFERENCE['roi_align'] if c['pool_mode'] == pool_mode)
    feats = REFERENCE['feats'][case['feat']].to(torch.bfloat16).requires_grad_(True)
    args = (case['output_size'], case['spatial_scale'], case['sampling_ratio'], pool_mode, case['aligned'])
    out = roi_align(feats, case['rois'].to(torch.bfloat16), *args)
    assert out.dtype == torch.bfloat16
    want = roi_align(feats.detach().float(), case['rois'].to(torch.bfloat16).float(), *args)
    torch.testing.assert_close(out, want.to(torch.bfloat16), rtol=0, atol=0)
    out.float().sum().backward()
    assert feats.grad.dtype == torch.bfloat16
    assert torch.isfinite(feats.grad.float()).all()
    boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.], [20., 20., 30., 30.]])
    assert nms(boxes.to(torch.bfloat16), torch.tensor([.9, .8, .7], dtype=torch.bfloat16), .5)[1].tolist() == [0, 2]
