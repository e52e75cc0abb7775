"""Runtime pieces for reliable training with InLine backbones.

Importing this package registers, in mmengine's ``HOOKS`` (so mmdet's and mmseg's
runners find them):

* ``InLinePaddingMaskHook``: features independent of batch padding (``enable_padding_mask``
  does the same without a Runner);
* ``AtomicCheckpointHook``: checkpoints and ``last_checkpoint`` written atomically;
* ``DeterministicResumeHook``: a resumed run draws the same random numbers as an
  uninterrupted one (the generators' states travel in the checkpoints);
* ``CheckpointFitHook``: a loaded checkpoint that does not fit the model is refused;

and, in mmengine's ``OPTIM_WRAPPERS``, ``CpuAmpOptimWrapper`` (bfloat16 autocast on CPU).
``launch`` holds what the train/test tools share (config loading, CPU process groups).
"""
from .checkpoint_fit import CheckpointFitHook, CheckpointMismatch
from .checkpointing import AtomicCheckpointHook, atomic_write_text, is_complete_checkpoint, newest_complete_checkpoint
from .cpu_amp import CpuAmpOptimWrapper
from .padding_mask import InLinePaddingMaskHook, PaddingMaskHandle, enable_padding_mask, image_shapes, padded_batch
from .randomness import DeterministicResumeHook, derived_seed

__all__ = ['AtomicCheckpointHook', 'CheckpointFitHook', 'CheckpointMismatch', 'CpuAmpOptimWrapper',
           'DeterministicResumeHook', 'InLinePaddingMaskHook', 'PaddingMaskHandle',
           'atomic_write_text', 'derived_seed', 'enable_padding_mask', 'image_shapes',
           'is_complete_checkpoint', 'newest_complete_checkpoint', 'padded_batch']
