"""Mixed precision in the runner: evaluation loops under autocast (``AmpTestLoop``, ``AmpValLoop`` in
mmengine's ``LOOPS``) and the training wrapper for a dtype (:func:`enable_amp_training`).

mmengine's own ``fp16=True`` loops autocast the model but hand its outputs to the metrics as
they come: bfloat16 / float16 boxes, scores and masks, which numpy (pycocotools, mIoU) cannot
read and which would round the boxes to 8 bits of mantissa. These loops run ``test_step`` under
``torch.autocast(device, dtype)`` and cast every floating-point tensor of the predictions back
to float32 (integer labels stay as they are) before the evaluator sees them.
``tools/test.py --amp`` and ``tools/demo_toy.py --amp`` select them (dtype from
:func:`inline_dense.runtime.precision.amp_dtype`).
"""
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.registry import LOOPS
from mmengine.runner.loops import TestLoop, ValLoop, _update_losses
from mmengine.structures import BaseDataElement


def to_float32(obj: Any) -> Any:
    """``obj`` with every floating-point tensor inside (data elements, lists, tuples, dicts) in float32."""
    if isinstance(obj, torch.Tensor):
        return obj.float() if obj.is_floating_point() and obj.dtype != torch.float32 else obj
    if isinstance(obj, BaseDataElement):
        for key, value in list(obj.items()):
            setattr(obj, key, to_float32(value))
        return obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_float32(v) for v in obj)
    if isinstance(obj, dict):
        return {k: to_float32(v) for k, v in obj.items()}
    return obj


def _dtype(dtype: str | torch.dtype) -> torch.dtype:
    value = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(f'amp loop: dtype {dtype!r} is not a floating-point torch dtype; use bfloat16 or float16')
    return value


class _AutocastIter:
    """``run_iter`` of a test/val loop with ``model.test_step`` under autocast, outputs back in float32."""

    runner: Any
    evaluator: Any
    autocast_dtype: torch.dtype

    @torch.no_grad()
    def run_iter(self, idx: int, data_batch: Sequence[dict]) -> None:
        test = isinstance(self, TestLoop)
        stage = 'test' if test else 'val'
        self.runner.call_hook(f'before_{stage}_iter', batch_idx=idx, data_batch=data_batch)
        model = self.runner.model
        device = next(iter(model.parameters())).device.type
        with torch.autocast(device_type=device, dtype=self.autocast_dtype):
            outputs = model.test_step(data_batch) if test else model.val_step(data_batch)
        outputs = to_float32(outputs)
        losses_attr = f'{stage}_loss'
        outputs, losses = _update_losses(outputs, getattr(self, losses_attr))
        setattr(self, losses_attr, losses)
        self.evaluator.process(data_samples=outputs, data_batch=data_batch)
        self.runner.call_hook(f'after_{stage}_iter', batch_idx=idx, data_batch=data_batch, outputs=outputs)


@LOOPS.register_module()
class AmpTestLoop(_AutocastIter, TestLoop):
    """mmengine's ``TestLoop`` with the model under ``torch.autocast(dtype)`` and float32 predictions."""

    def __init__(self, runner: Any, dataloader: Any, evaluator: Any, dtype: str | torch.dtype = 'bfloat16'):
        super().__init__(runner, dataloader, evaluator)
        self.autocast_dtype = _dtype(dtype)


@LOOPS.register_module()
class AmpValLoop(_AutocastIter, ValLoop):
    """mmengine's ``ValLoop`` with the model under ``torch.autocast(dtype)`` and float32 predictions."""

    def __init__(self, runner: Any, dataloader: Any, evaluator: Any, dtype: str | torch.dtype = 'bfloat16'):
        super().__init__(runner, dataloader, evaluator)
        self.autocast_dtype = _dtype(dtype)


def enable_amp_eval(cfg: Any, dtype: torch.dtype) -> None:
    """Switches the config's test and val loops to the autocast ones for ``dtype``; refuses (ValueError,
    in the tools' terms) a two-stage detector on the CPU whose compiled mmcv NMS / RoIAlign lack bfloat16."""
    name = str(dtype).replace('torch.', '')
    model = cfg.get('model') or {}
    if dtype == torch.bfloat16 and (model.get('rpn_head') or model.get('roi_head')):
        from ..mmcv_ops import uses_stand_in
        if not uses_stand_in():
            raise ValueError(f'--amp on CPU: {model.get("type")} proposes boxes with compiled mmcv\'s NMS / '
                             f'RoIAlign, whose CPU kernels have no bfloat16 version; evaluate it without --amp, '
                             f'on a GPU, or on mmcv-lite (MMCV=lite bash tools/setup_env.sh).')
    for key, loop in (('test_cfg', 'AmpTestLoop'), ('val_cfg', 'AmpValLoop')):
        if cfg.get(key) is not None:
            cfg[key] = dict(type=loop, dtype=name)


def enable_amp_training(cfg: Any, dtype: torch.dtype, device: str = 'cpu') -> None:
    """The config's optimizer wrapper under autocast for ``dtype`` on ``device`` ('cpu' or 'cuda'), as
    ``tools/train.py --amp`` sets it: ``CpuAmpOptimWrapper`` on the CPU, ``AmpOptimWrapper`` on a GPU;
    a dynamic loss scale for float16 only (bfloat16 has float32's range)."""
    wrapper = cfg.optim_wrapper
    wrapper.type = 'CpuAmpOptimWrapper' if device == 'cpu' else 'AmpOptimWrapper'
    if dtype == torch.float16:
        wrapper.setdefault('loss_scale', 'dynamic')
    else:
        wrapper.pop('loss_scale', None)
    wrapper.dtype = str(dtype).replace('torch.', '')
