"""Step 1: the stack imports, and mmcv's ops (served by inline_dense.ops with mmcv-lite) give on
the device what mmcv 2.1.0's compiled CPU ops gave (``mmcv_ops_reference.pt``): nms and
batched_nms (the kept set), roi_align forward and backward (avg and max pooling); and mmcv's
sigmoid focal loss matches mmdet's pure-torch ``py_sigmoid_focal_loss``."""
import importlib
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import torch
import torch.nn.functional as F

from .measure import Emit, max_abs, recorded
from .plan import CheckPlan, fixture_path

PACKAGES = ('torch', 'torchvision', 'numpy', 'timm', 'mmengine', 'mmcv', 'mmdet', 'mmseg', 'inline_dense')
ROI_TOL = 1e-4  # absolute, on unit-scale features: float32 sums in another order (CUDA atomics)


def stack_row(device: torch.device) -> dict[str, Any]:
    """Versions of the stack, the GPU, and where ``mmcv._ext`` comes from."""
    import inline_dense_mmcv_hook
    row: dict[str, Any] = {'name': 'stack'}
    for name in PACKAGES:
        row[name] = getattr(importlib.import_module(name), '__version__', '?')
    row['cuda'] = torch.version.cuda or '-'
    if device.type == 'cuda':
        row['gpu'] = torch.cuda.get_device_name(device)
    row['mmcv._ext'] = inline_dense_mmcv_hook.describe()
    import mmcv.ops  # noqa: F401  (imports mmcv._ext: fails here when the ops layer is broken)
    return row


def nms_case(case: dict[str, Any], device: torch.device) -> dict[str, Any]:
    """Kept set equal to the reference's (order among equal scores is not a contract), and the
    kept boxes' rows; returns {ok, max_err}."""
    from mmcv.ops import batched_nms, nms
    boxes, scores = case['boxes'].to(device), case['scores'].to(device)
    if case['kind'] == 'nms':
        dets, keep = nms(boxes, scores, case['iou_threshold'])
    else:
        dets, keep = batched_nms(boxes, scores, case['labels'].to(device), dict(case['nms_cfg']))
    same = sorted(keep.cpu().tolist()) == sorted(case['keep'].tolist())
    err = 0.0
    if same and len(keep):
        order, ref_order = keep.cpu().argsort(), case['keep'].argsort()
        err = max_abs(dets.cpu()[order], case['dets'][ref_order])
    return dict(ok=same and err <= 1e-5, max_err=err)


def roi_case(case: dict[str, Any], feats: list[torch.Tensor], device: torch.device) -> dict[str, Any]:
    from mmcv.ops import roi_align
    feat = feats[case['feat']].to(device, copy=True).requires_grad_(True)  # a copy: .grad is per case
    out = roi_align(feat, case['rois'].to(device), case['output_size'], case['spatial_scale'],
                    case['sampling_ratio'], case['pool_mode'], case['aligned'])
    out.backward(case['grad_out'].to(device))
    err = max(max_abs(out, case['out']), max_abs(feat.grad, case['grad_feat']))
    return dict(ok=err <= ROI_TOL, max_err=err)


def reference_cases(plan: CheckPlan, device: torch.device) -> dict[str, list[tuple[int, Callable]]]:
    """The reference's cases by op kind: (index, a call that runs it and returns {ok, max_err})."""
    ref = torch.load(fixture_path(plan, 'mmcv_ops_reference.pt'), map_location='cpu', weights_only=False)
    groups: dict[str, list[tuple[int, Callable]]] = defaultdict(list)
    for i, case in enumerate(ref['nms']):
        groups[case['kind']].append((i, partial(nms_case, case, device)))
    for i, case in enumerate(ref['roi_align']):
        groups[f'roi_align {case["pool_mode"]} fwd+bwd'].append((i, partial(roi_case, case, ref['feats'], device)))
    return groups


def group_row(row: dict[str, Any], cases: list[tuple[int, Callable]]) -> None:
    """Runs one kind's cases into ``row``: how many failed, the largest error."""
    failed, worst = [], 0.0
    for i, run_case in cases:
        result = run_case()
        worst = max(worst, result['max_err'])
        if not result['ok']:
            failed.append(i)
    row.update(failed=len(failed), max_err=worst, ok=not failed)
    if failed:
        row['error'] = f'cases {failed[:10]} differ from mmcv 2.1.0'


def focal_row(device: torch.device) -> dict[str, Any]:
    """mmdet's ``sigmoid_focal_loss`` (mmcv's op) against ``py_sigmoid_focal_loss``: loss and gradient."""
    from mmdet.models.losses.focal_loss import py_sigmoid_focal_loss, sigmoid_focal_loss
    g = torch.Generator().manual_seed(0)
    num, classes = 512, 80
    logits = (torch.randn(num, classes, generator=g) * 3).to(device)
    labels = torch.randint(0, classes + 1, (num,), generator=g).to(device)  # classes = background
    onehot = F.one_hot(labels, classes + 1)[:, :classes].to(logits.dtype)
    results = []
    for fn, target in ((sigmoid_focal_loss, labels), (py_sigmoid_focal_loss, onehot)):
        x = logits.clone().requires_grad_(True)
        loss = fn(x, target, reduction='sum')
        loss.backward()
        results.append((loss.detach(), x.grad))
    (la, ga), (lb, gb) = results
    loss_err, grad_err = max_abs(la, lb) / max(lb.abs().item(), 1e-12), max_abs(ga, gb)
    return dict(name='sigmoid focal loss vs py_sigmoid_focal_loss', cases=1, loss_rel_err=loss_err,
                max_err=grad_err, ok=loss_err < 1e-5 and grad_err < 1e-5)


def run(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    with recorded(emit, device, name='stack') as row:
        row.update(stack_row(device))
    groups: dict[str, list[tuple[int, Callable]]] = {}
    with recorded(emit, device, name='load mmcv_ops_reference.pt') as row:
        groups = reference_cases(plan, device)
        row['cases'] = sum(map(len, groups.values()))
    for kind, cases in groups.items():
        with recorded(emit, device, name=kind, cases=len(cases)) as row:
            group_row(row, cases)
    with recorded(emit, device, name='sigmoid focal loss vs py_sigmoid_focal_loss') as row:
        row.update(focal_row(device))
