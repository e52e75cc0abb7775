"""``inline://`` names for mmengine's ``CheckpointLoader`` (``load_from``, ``load_checkpoint``).

:func:`register_mmengine_scheme` is called by the adapter's ``__init__`` (:mod:`inline_dense.openmmlab`);
the reading itself is the torch-only :mod:`inline_dense.checkpoint`'s.
"""
from typing import Any

from ..checkpoint import INIT_CFG
from ..checkpoint.reading import read_checkpoint, select_weights
from ..checkpoint.sources import SCHEME, resolve


def load_from_inline(filename: str, map_location: Any = None) -> dict[str, Any]:
    """mmengine ``CheckpointLoader`` scheme for ``inline://``: the file read safely (see
    ``loading.read_checkpoint``), with the chosen weights (EMA if present) under ``state_dict``
    in the file's own key layout (our backbones' ``init_cfg`` also converts the layout)."""
    path = resolve(filename, advice=INIT_CFG)
    obj = read_checkpoint(path, map_location=map_location or 'cpu', advice=INIT_CFG)
    chosen, which = select_weights(obj, 'auto', repr(path))
    rest = {k: v for k, v in obj.items() if k not in ('model', 'state_dict', 'state_dict_ema', 'model_ema')}
    meta = dict(rest['meta']) if isinstance(rest.get('meta'), dict) else {}
    meta.update(inline_weights=which, inline_source=path)
    return {**rest, 'state_dict': dict(chosen), 'meta': meta}


_registered = False


def register_mmengine_scheme() -> None:
    """Registers ``inline://`` with mmengine's ``CheckpointLoader`` (idempotent)."""
    global _registered
    if _registered:
        return
    from mmengine.runner import CheckpointLoader
    CheckpointLoader.register_scheme(prefixes=SCHEME, loader=load_from_inline)
    _registered = True
