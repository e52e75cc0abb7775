"""Step 5: Mask R-CNN with InLine-Swin-T against Mask R-CNN with mmdet's Swin-T: one training
step (forward under bfloat16 autocast, backward, AdamW) on a synthetic batch of 2 at
800x1344, its median time and peak memory; then float16 autocast with a dynamic loss scale
(``torch.amp.GradScaler``, what mmengine's ``AmpOptimWrapper(loss_scale='dynamic')`` runs),
whose losses and gradients must be finite once the scale has settled."""
import math
from typing import Any

import numpy as np
import torch
from torch import nn

from inline_dense import openmmlab  # noqa: F401  (registers the InLine backbones)
from inline_dense.openmmlab.engine.launch import REPO_ROOT

from .measure import Emit, all_finite, recorded, release, time_step
from .plan import HW, CheckPlan, resolve_detector_config

NUM_OBJECTS = 4


def build_detector(config: str, repo_root: str, device: torch.device,
                   options: dict[str, Any] | None = None) -> nn.Module:
    """The config's model (``options`` merged in), randomly initialised (no pretrained file:
    the GPU machine has no network)."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    from mmengine.hub import get_config
    register_all_modules(init_default_scope=True)
    path = resolve_detector_config(config, repo_root)
    cfg = get_config(path) if '::' in path else Config.fromfile(path)
    cfg.merge_from_dict(dict(options or {}, **{'model.backbone.init_cfg': None}))
    torch.manual_seed(0)
    model = MODELS.build(cfg.model)
    model.init_weights()
    return model.to(device)


def synthetic_batch(batch: int, hw: HW, num_classes: int, seed: int = 0) -> dict[str, Any]:
    """uint8 images and ``DetDataSample``s with a few random boxes, their labels and box-shaped
    masks: what ``PackDetInputs`` hands the data preprocessor."""
    from mmdet.structures import DetDataSample
    from mmdet.structures.mask import BitmapMasks
    from mmengine.structures import InstanceData
    g = torch.Generator().manual_seed(seed)
    h, w = hw
    inputs, samples = [], []
    for _ in range(batch):
        inputs.append(torch.randint(0, 256, (3, h, w), dtype=torch.uint8, generator=g))
        xy = torch.rand(NUM_OBJECTS, 2, generator=g) * 0.6 * torch.tensor([w, h])
        size = (0.1 + 0.3 * torch.rand(NUM_OBJECTS, 2, generator=g)) * torch.tensor([w, h])
        boxes = torch.cat([xy, xy + size], 1).round()
        masks = np.zeros((NUM_OBJECTS, h, w), dtype=np.uint8)
        for i, (x1, y1, x2, y2) in enumerate(boxes.int().tolist()):
            masks[i, y1:y2, x1:x2] = 1
        sample = DetDataSample(metainfo=dict(img_shape=hw, ori_shape=hw, scale_factor=(1.0, 1.0)))
        sample.gt_instances = InstanceData(bboxes=boxes, masks=BitmapMasks(masks, h, w),
                                           labels=torch.randint(0, num_classes, (NUM_OBJECTS,), generator=g))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def train_step(model: nn.Module, data: dict[str, Any], optimizer: torch.optim.Optimizer, dtype: torch.dtype,
               scaler: torch.amp.GradScaler | None = None) -> dict[str, Any]:
    """One step: forward under autocast, backward (scaled when ``scaler``), optimizer step.
    Returns the loss, whether it and the (unscaled) gradients are finite, and the scale."""
    device_type = data['inputs'].device.type
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type, dtype=dtype, enabled=dtype != torch.float32):
        losses = model(**data, mode='loss')
    loss, _ = model.parse_losses(losses)
    (scaler.scale(loss) if scaler else loss).backward()
    if scaler:
        scaler.unscale_(optimizer)
    grads_finite = all_finite(*(p.grad for p in model.parameters()))
    if scaler:
        scale = scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
    else:
        scale = 1.0
        optimizer.step()
    return dict(loss=loss.item(), loss_finite=math.isfinite(loss.item()), grads_finite=grads_finite, scale=scale)


def fp16_row(model: nn.Module, data: dict[str, Any], steps: int, dtype: torch.dtype, row: dict[str, Any]) -> None:
    """``steps`` float16 steps with a dynamic loss scale: a step whose gradients overflow is
    skipped and the scale halved; the losses must stay finite and the last step's gradients too."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(data['inputs'].device.type)
    results = [train_step(model, data, optimizer, dtype, scaler) for _ in range(steps)]
    row.update(steps=steps, losses=[round(r['loss'], 4) for r in results],
               losses_finite=all(r['loss_finite'] for r in results),
               skipped=sum(not r['grads_finite'] for r in results),
               last_grads_finite=results[-1]['grads_finite'], scale=scaler.get_scale())
    row['ok'] = row['losses_finite'] and row['last_grads_finite']
    if not row['ok']:
        row['error'] = 'float16 losses or gradients not finite'


def run(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    h, w = plan.detector_size
    for label, config in plan.detectors.items():
        model = None
        with recorded(emit, device, name=f'build {label}', model=label) as row:
            model = build_detector(config, REPO_ROOT, device, plan.detector_options)
            model.train()
            row['params_m'] = round(sum(p.numel() for p in model.parameters()) / 1e6, 2)
        if model is None:
            continue
        num_classes = model.roi_head.bbox_head.num_classes
        data = model.data_preprocessor(synthetic_batch(plan.batch, (h, w), num_classes), training=True)
        amp = getattr(torch, plan.amp_dtype)
        with recorded(emit, device, name=f'{label} train step {plan.amp_dtype}', model=label, input=f'{h}x{w}',
                      batch=plan.batch, dtype=plan.amp_dtype) as row:
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            last: dict[str, Any] = {}

            # default arguments bind this detector's objects (the loop rebinds the names)
            def step(model=model, data=data, optimizer=optimizer, amp=amp, last=last) -> None:
                last.update(train_step(model, data, optimizer, amp))
            row.update(time_step(step, plan.warmup, plan.runs, device))
            row.update(loss=round(last['loss'], 4), loss_finite=last['loss_finite'],
                       grads_finite=last['grads_finite'])
            row['ok'] = last['loss_finite'] and last['grads_finite']
        with recorded(emit, device, name=f'{label} {plan.fp16_dtype} dynamic loss scale', model=label,
                      input=f'{h}x{w}',
                      batch=plan.batch, dtype=plan.fp16_dtype) as row:
            fp16_row(model, data, plan.fp16_steps, getattr(torch, plan.fp16_dtype), row)
        del model, data
        release(device)
