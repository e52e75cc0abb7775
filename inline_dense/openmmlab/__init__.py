"""The OpenMMLab adapter: what MMDetection 3.x and MMSegmentation 1.x need of inline_dense.

``import inline_dense.openmmlab`` (the configs' ``custom_imports`` name it) does, each step
idempotent (a second import, or mmdet and mmseg imported in either order, leaves the same
registries):

1. mmcv-lite gets its ops: ``mmcv.ops`` runs on :mod:`inline_dense.ops` (before anything
   imports ``mmcv.ops``);
2. registry entries in mmengine's root registries (mmdet's and mmseg's registries are its
   children and find them): ``MODELS``: one backbone per family of :mod:`inline_dense.registry`
   under its class name (:mod:`.backbones`: the core backbones with ``init_cfg`` and
   ``init_weights()``),
   ``SimpleFPN`` and ``LN2d`` (:mod:`.necks`, ViTDet's simple pyramid); ``HOOKS``:
   ``InLinePaddingMaskHook``, ``AtomicCheckpointHook``, ``DeterministicResumeHook``,
   ``CheckpointFitHook``; ``OPTIM_WRAPPERS``: ``CpuAmpOptimWrapper`` (:mod:`.engine`).
   A name taken by someone else raises mmengine's "already registered" error; nothing is
   overwritten;
3. ``torch.load(weights_only=True)`` accepts the types mmengine writes into checkpoints;
4. mmengine's ``CheckpointLoader`` reads ``inline://<variant>`` names;
5. the core's log lines (``logging``) go to mmengine's current logger (:mod:`.log_bridge`);
6. a very thin picture, an unreadable image file and a 1x1 picture in mmseg's visualizer work or
   fail in one line (:mod:`.engine.image_guards`).

Before all that, :mod:`inline_dense.warning_filters` silences the OpenMMLab packages' known import
warnings, each by category, message and module (nothing else).

The torch-only core (:mod:`inline_dense.models`) imports none of this.
"""
import inline_dense_mmcv_hook

from .. import warning_filters  # imports nothing else

warning_filters.install()  # before mmengine / mmdet / mmseg are imported: their import warnings, named
inline_dense_mmcv_hook.install()  # 1. before mmcv.ops is imported below: mmcv-lite gets its ops

from . import backbones, engine, necks  # noqa: E402,F401  2. backbones, neck, hooks register themselves as defined
from .backbones import *  # noqa: E402,F403  (every family's registered class, by its name)
from .engine import image_guards  # noqa: E402
from .log_bridge import bridge_core_logging  # noqa: E402
from .mmengine_scheme import register_mmengine_scheme  # noqa: E402
from .mmengine_types import allow_mmengine_checkpoint_types  # noqa: E402

allow_mmengine_checkpoint_types()  # 3.
register_mmengine_scheme()  # 4.
bridge_core_logging()  # 5.
image_guards.install()  # 6.

__all__ = backbones.__all__  # the same list: a family registered at run time joins it


def __getattr__(name: str) -> type:  # PEP 562: the class of a family registered after this import
    if name in backbones.__all__:
        return getattr(backbones, name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
