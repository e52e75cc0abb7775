"""Step 6: DINO-4scale and Mask2Former (instance, lsj recipe) with InLine-Swin-T: one float32
training step each (the recipes train in float32) on a synthetic batch of 2, with the stand-in
serving mmcv's compiled multi-scale deformable attention, as mmcv calls it on CUDA: its median
time, peak memory, and which ``mmcv._ext`` ops the step called (the deformable attention's
forward and backward, nothing the stand-in does not serve).

On a CPU, mmcv takes its pure function instead; the dry run routes that call to the compiled-op
path (:func:`compiled_op_path`), so it walks the code the GPU run walks."""
import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from inline_dense.openmmlab.engine.launch import REPO_ROOT
from inline_dense.openmmlab.mmcv_ops import mmcv_ext

from .detector_step import build_detector, synthetic_batch, train_step
from .measure import Emit, recorded, release, time_step
from .plan import CheckPlan

DEFORM_OPS = ('ms_deform_attn_forward', 'ms_deform_attn_backward')


@contextlib.contextmanager
def compiled_op_path(device: torch.device) -> Iterator[None]:
    """On a CPU, mmcv's ``MultiScaleDeformableAttention`` calls its pure function; within this,
    that call goes through ``MultiScaleDeformableAttnFunction`` (``mmcv._ext``) as on CUDA.
    On CUDA, nothing changes."""
    if device.type == 'cuda':
        yield
        return
    import mmcv.ops.multi_scale_deform_attn as msda

    def through_ext(value, spatial_shapes, sampling_locations, attention_weights):
        sizes = spatial_shapes[:, 0] * spatial_shapes[:, 1]
        start = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
        return msda.MultiScaleDeformableAttnFunction.apply(value, spatial_shapes, start, sampling_locations,
                                                           attention_weights, 64)

    pure = msda.multi_scale_deformable_attn_pytorch
    msda.multi_scale_deformable_attn_pytorch = through_ext
    try:
        yield
    finally:
        msda.multi_scale_deformable_attn_pytorch = pure


def num_classes(model: torch.nn.Module) -> int:
    head = getattr(model, 'bbox_head', None) or model.panoptic_head
    return head.num_classes


def ext_calls_row(row: dict[str, Any], before: dict[str, int]) -> None:
    """The ``mmcv._ext`` ops called since ``before``; the row fails unless both deformable
    attention ops were called and every op called is served."""
    ext = mmcv_ext()
    called = {k: v - before.get(k, 0) for k, v in ext.CALLS.items() if v > before.get(k, 0)}
    row['ext_calls'] = ' '.join(f'{k}={v}' for k, v in sorted(called.items()))
    unserved = sorted(set(called) - set(ext.SERVED))
    missing = [op for op in DEFORM_OPS if op not in called]
    if missing or unserved:
        row['ok'] = False
        row['error'] = (f'not called: {missing}' if missing else '') + (f' unserved: {unserved}' if unserved else '')


def run(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    ext = mmcv_ext()
    for label, spec in plan.query_heads.items():
        model = None
        with recorded(emit, device, name=f'build {label}', model=label) as row:
            model = build_detector(spec['config'], REPO_ROOT, device, spec.get('options'))
            model.train()
            row['params_m'] = round(sum(p.numel() for p in model.parameters()) / 1e6, 2)
            row['mmcv._ext'] = 'stand-in' if getattr(ext, 'IS_STAND_IN', False) else 'compiled'
        if model is None:
            continue
        h, w = spec['size']
        data = model.data_preprocessor(synthetic_batch(plan.batch, (h, w), num_classes(model)), training=True)
        with recorded(emit, device, name=f'{label} train step float32', model=label, input=f'{h}x{w}',
                      batch=plan.batch, dtype='float32') as row:
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            last: dict[str, Any] = {}

            # default arguments bind this model's objects (the loop rebinds the names)
            def step(model=model, data=data, optimizer=optimizer, last=last) -> None:
                last.update(train_step(model, data, optimizer, torch.float32))
            before = dict(ext.CALLS)
            with compiled_op_path(device):
                row.update(time_step(step, plan.warmup, plan.runs, device))
            row.update(loss=round(last['loss'], 4), loss_finite=last['loss_finite'],
                       grads_finite=last['grads_finite'])
            row['ok'] = last['loss_finite'] and last['grads_finite']
            ext_calls_row(row, before)
            if not row['ok'] and 'error' not in row:
                row['error'] = 'loss or gradients not finite'
        del model, data
        release(device)
