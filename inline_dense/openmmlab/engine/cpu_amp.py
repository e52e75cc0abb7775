"""Mixed precision on CPU-only machines: ``--amp`` without a GPU."""
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS
from torch import nn


@OPTIM_WRAPPERS.register_module()
class CpuAmpOptimWrapper(OptimWrapper):
    """``OptimWrapper`` whose forward runs under ``torch.autocast('cpu', dtype)``, without loss scaling.

    mmengine's ``AmpOptimWrapper`` refuses to run without a GPU/NPU/MLU, and torch has no
    float16 autocast on CPU; bfloat16 (the default) keeps float32's exponent range, so no
    loss scaling is needed. ``tools/train.py --amp`` selects it on CPU.
    """

    def __init__(self, dtype: str | torch.dtype = 'bfloat16', **kwargs) -> None:
        super().__init__(**kwargs)
        self.cast_dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype

    @contextmanager
    def optim_context(self, model: nn.Module) -> Iterator[None]:
        with super().optim_context(model), torch.autocast('cpu', dtype=self.cast_dtype):
            yield
