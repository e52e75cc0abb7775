"""InLine attention backbones for MMDetection 3.x and MMSegmentation 1.x.

Importing the package registers ``InLineSwin``, ``InLinePVT`` and ``InLineCSwin`` in mmdet's and
mmseg's MODELS registries and makes mmengine's checkpoints loadable under
``torch.load(weights_only=True)``. With mmcv-lite, ``mmcv.ops`` runs on :mod:`inline_dense.ops`.
"""
import inline_dense_mmcv_hook

inline_dense_mmcv_hook.install()  # before mmcv.ops is imported below: mmcv-lite gets its ops

from .checkpoint.mmengine_types import allow_mmengine_checkpoint_types
from .models import InLineAttention, InLineCSwin, InLinePVT, InLineSwin
from . import engine  # noqa: F401  registers InLinePaddingMaskHook, AtomicCheckpointHook, DeterministicResumeHook

allow_mmengine_checkpoint_types()

__version__ = '0.1.0'
__all__ = ['InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin', '__version__']
