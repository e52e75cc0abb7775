"""Runtime pieces for reliable training with InLine backbones.

Importing this package registers, in mmengine's ``HOOKS`` (so mmdet's and mmseg's
runners find them):

* ``InLinePaddingMaskHook``: features independent of batch padding (``enable_padding_mask``
  does the same without a Runner);
* ``AtomicCheckpointHook``: checkpoints and ``last_checkpoint`` written atomically;
* ``DeterministicResumeHook``: a resumed run draws the same random numbers as an
  uninterrupted one (the generators' states travel in the checkpoints);
* ``CheckpointFitHook``: a loaded checkpoint that does not fit the model is refused;
* ``InferenceCompileHook``: the test loop runs the model compiled (``tools/test.py --compile``);

and, in mmengine's ``OPTIM_WRAPPERS``, ``CpuAmpOptimWrapper`` (bfloat16 autocast on CPU); in
``OPTIM_WRAPPER_CONSTRUCTORS``, ``LayerDecayOptimWrapperConstructor`` (ViTDet's layer-wise lr decay);
in its ``LOOPS``, ``AmpTestLoop`` / ``AmpValLoop`` (evaluation under autocast, float32 predictions).
It also lets ``torch.load(weights_only=True)`` read the checkpoints a Runner writes (its resume
reads them so) and mmengine's ``CheckpointLoader`` read ``inline://`` names; both idempotent, and
done again by the adapter's ``__init__`` (:mod:`inline_dense.openmmlab`, which imports this package
and also registers the backbones; importing this package runs it first).
``launch`` holds what the train/test tools share (config loading, CPU process groups).
"""
from ..mmengine_scheme import register_mmengine_scheme
from ..mmengine_types import allow_mmengine_checkpoint_types
from .amp import AmpTestLoop, AmpValLoop
from .checkpoint_fit import CheckpointFitHook, CheckpointMismatch
from .checkpointing import AtomicCheckpointHook, atomic_write_text, is_complete_checkpoint, newest_complete_checkpoint
from .compile_hook import InferenceCompileHook
from .cpu_amp import CpuAmpOptimWrapper
from .layer_decay import LayerDecayOptimWrapperConstructor
from .mmengine_compat import resolve_mmseg_configs
from .padding_mask import InLinePaddingMaskHook, PaddingMaskHandle, enable_padding_mask, image_shapes, padded_batch
from .randomness import DeterministicResumeHook, derived_seed

allow_mmengine_checkpoint_types()  # after the imports above: they import mmengine, whose types it adds
resolve_mmseg_configs()  # mmseg:: config names with onedl-mmsegmentation (mmengine_compat)
register_mmengine_scheme()

__all__ = ['AmpTestLoop', 'AmpValLoop', 'AtomicCheckpointHook', 'CheckpointFitHook', 'CheckpointMismatch',
           'CpuAmpOptimWrapper', 'LayerDecayOptimWrapperConstructor',
           'DeterministicResumeHook', 'InLinePaddingMaskHook', 'InferenceCompileHook', 'PaddingMaskHandle',
           'atomic_write_text', 'derived_seed', 'enable_padding_mask', 'image_shapes',
           'is_complete_checkpoint', 'newest_complete_checkpoint', 'padded_batch']
