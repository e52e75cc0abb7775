"""Step 4: the backbones (``plan.backbones``: every registered family's first variant, and mmdet's
softmax backbone of its preset where the family has one), forward and forward + backward under
bfloat16 autocast (``plan.amp_dtype``), batch 2, at each size: median time after warm-up and peak memory."""
from collections.abc import Callable
from typing import Any

import torch

from inline_dense.analysis.timing import make_step
from inline_dense.analysis.zoo import build_backbone, init_model

from .measure import Emit, recorded, release, time_step
from .plan import CheckPlan


def autocast_step(step: Callable[[], Any], device: torch.device, dtype: torch.dtype) -> Callable[[], None]:
    def run() -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            step()
    return run


def run(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    for name in plan.backbones:
        model = None
        with recorded(emit, device, name=f'build {name}', model=name) as row:
            torch.manual_seed(0)
            model = build_backbone(name)
            init_model(model)
            model.to(device)
            row['params_m'] = round(sum(p.numel() for p in model.parameters()) / 1e6, 2)
        if model is None:
            continue
        for h, w in plan.backbone_sizes:
            x = torch.randn(plan.batch, 3, h, w, device=device)
            for mode in ('infer', 'train'):
                with recorded(emit, device, name=f'{name} {h}x{w} {mode}', model=name, input=f'{h}x{w}',
                              mode=mode, batch=plan.batch, dtype=plan.amp_dtype) as row:
                    step = autocast_step(make_step(model, x, mode), device, getattr(torch, plan.amp_dtype))
                    row.update(time_step(step, plan.warmup, plan.runs, device))
            del x
            release(device)
        del model
        release(device)
