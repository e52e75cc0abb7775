"""Reading a checkpoint file without running code from it, and finding the weights inside it
(model or EMA weights, ``module.`` / ``backbone.`` prefixes)."""
import errno
import logging
import os
import pickle
import struct
import zipfile
from collections.abc import Mapping
from typing import Any

import torch

from .. import variants
from ..typing import StateDict
from . import safe_unpickle
from .cache import checkpoint_cache
from .errors import CORE, Advice, CheckpointError
from .safetensors_errors import SAFETENSORS_ERRORS

log = logging.getLogger(__name__)

# Where the weights sit in a checkpoint dict, tried in this order.
MODEL_KEYS = ('state_dict', 'model')         # mmengine / the authors' training code
EMA_KEYS = ('state_dict_ema', 'model_ema')   # EMA weights (timm / the authors' CSwin files)
WEIGHTS_CHOICES = ('auto', 'model', 'ema')


def read_checkpoint(path: str, trusted: bool = False, map_location: Any = 'cpu',
                    example: str = variants.EXAMPLE, advice: Advice = CORE) -> Mapping:
    """Reads a local checkpoint file without running code from it.

    ``safe_unpickle.load`` reads it: its tensors as ``torch.load`` does, other pickled objects (a yacs
    ``CfgNode``, an ``argparse.Namespace``, optimizer / scheduler state) as inert ``PickledObject``
    data. (Not ``torch.load(weights_only=True)``: its allow-list takes whatever any imported library
    registers, ``traceback.FrameSummary`` included, which reads files.)
    A pickle that names or calls anything outside the allow-list (``os.system``, ``eval``,
    ``subprocess`` ...) raises ``CheckpointError`` and nothing of it runs.
    ``trusted=True`` unpickles arbitrary objects (``tools/convert_checkpoint.py --trusted``, for a
    file from a source you trust that is refused otherwise). ``example``: the short name the
    missing-file message suggests (the backbone's family); ``advice``: the caller's terms for it.
    """
    path = os.path.expanduser(str(path))
    if os.path.isdir(path):
        inside = sorted(name for name in os.listdir(path) if name.endswith(('.pth', '.pt', '.safetensors', '.bin')))
        which = f'in it (e.g. {os.path.join(path, inside[0])})' if inside else '(.pth or .safetensors)'
        raise CheckpointError(f'checkpoint {path!r} is a directory, not a file; pass a checkpoint file {which}.')
    if not os.path.isfile(path):
        ending = advice.ending(f'use a short name ({advice.short_name.format(name=example)}, downloaded on first use), '
                               f'save the authors\' ImageNet checkpoint there (table in checkpoints/README.md)'
                               if advice.short_name else '')
        raise FileNotFoundError(
            f'pretrained checkpoint {path!r} (absolute: {os.path.abspath(path)!r}) does not exist. {ending}')
    if trusted:
        try:
            return torch.load(path, map_location=map_location, weights_only=False)
        except UNREADABLE_OR_CUT as exc:
            raise _unreadable(path, exc) from exc
    try:
        safe_unpickle.refuse_torchscript(path)
    except (safe_unpickle.RefusedPickle, zipfile.BadZipFile, OSError) as exc:
        raise CheckpointError(f'refusing to load {path!r}: {exc}.') from exc
    try:
        obj, kept = safe_unpickle.load(path, map_location)
    except safe_unpickle.RefusedPickle as exc:
        raise CheckpointError(
            f'refusing to load {path!r}: {exc}. Unpickling it normally would run code the file names; '
            f'nothing of it was run. A weights file has no reason to do this: get it again from its source. '
            f'Only if you wrote the file yourself and know why it does this: python '
            f'tools/convert_checkpoint.py --trusted {path} OUT.pth, then use OUT.pth.') from exc
    except UNREADABLE_OR_CUT as exc:
        raise _unreadable(path, exc) from exc
    if kept:
        log.info(f'{path}: read with objects of {len(kept)} class(es) kept as plain data, none of their '
                 f'code run: {", ".join(kept[:8])}{" ..." if len(kept) > 8 else ""}')
    return obj


# What a damaged or foreign file makes torch's reader or the restricted one raise. Anything else
# (a TypeError in the loader, say) is a bug and propagates as it is.
UNREADABLE: tuple[type[BaseException], ...] = (EOFError, RuntimeError, zipfile.BadZipFile, ValueError, KeyError,
                                                IndexError, struct.error, pickle.UnpicklingError, *SAFETENSORS_ERRORS)
# ... and torch's zip reader on a file cut to about 5-65 KB: OSError EINVAL (see _unreadable)
UNREADABLE_OR_CUT: tuple[type[BaseException], ...] = (*UNREADABLE, OSError)
_CUT = ('central directory', 'unexpected end', 'truncated', 'failed reading', 'ran out of input')


def _unreadable(path: str, exc: BaseException) -> CheckpointError:
    """The one-line error for a file torch's reader or the restricted one failed on. An ``OSError``
    other than ``EINVAL`` (permissions, I/O) is about the disk, not the file's content: re-raised."""
    if isinstance(exc, OSError) and exc.errno not in (None, errno.EINVAL):
        raise exc
    detail = f'{type(exc).__name__}: {str(exc)[:200]}'
    # EINVAL: torch's zip reader seeks 64 KB back from the end for the central directory, before the
    # start of a zip cut to about 5-65 KB
    if isinstance(exc, (EOFError, zipfile.BadZipFile, OSError)) or any(c in str(exc).lower() for c in _CUT):
        why = (f'it ends early or its archive is damaged ({detail}): truncated by an interrupted download or '
               f'write: download or save it again')
    elif isinstance(exc, SAFETENSORS_ERRORS):
        why = f'it is a damaged or incomplete .safetensors file ({detail}): download or save it again'
    elif isinstance(exc, safe_unpickle.MalformedPickle):
        why = f'its pickle is malformed ({detail}): the file is damaged or not a PyTorch checkpoint'
    else:
        why = f'it is not a checkpoint at all, or a damaged one ({detail})'
    where = ''
    if os.path.dirname(os.path.abspath(path)) == str(checkpoint_cache()):
        where = f' It is in the checkpoint cache: delete {path} and {path}.json; the next run downloads it again.'
    return CheckpointError(f'{path!r} is not a readable PyTorch checkpoint: {why}.{where}')


def select_weights(obj: Mapping, weights: str = 'auto', source: str = 'checkpoint') -> tuple[Mapping, str]:
    """The weights mapping inside ``obj`` and which one it is.

    ``weights``: ``'auto'`` (EMA weights if the file has them, else the model's), ``'model'``,
    ``'ema'`` (an error if the file holds none). Returns (mapping, a label for the log:
    ``"EMA weights ('state_dict_ema')"``, ``"model weights ('model')"``, ``'model weights (bare state dict)'``).
    """
    if weights not in WEIGHTS_CHOICES:
        raise ValueError(f"weights={weights!r}: use one of {list(WEIGHTS_CHOICES)} ('auto': EMA if present).")
    if not isinstance(obj, Mapping):
        raise CheckpointError(f'{source} holds a {type(obj).__name__}, not a checkpoint dict.')
    ema = next((k for k in EMA_KEYS if isinstance(obj.get(k), Mapping)), None)
    model = next((k for k in MODEL_KEYS if isinstance(obj.get(k), Mapping)), None)
    if weights == 'ema' and ema is None:
        raise CheckpointError(f"{source} has no EMA weights (looked for {list(EMA_KEYS)}; top-level keys: "
                              f"{sorted(map(str, obj))[:10]}); use weights='model' or 'auto'.")
    if ema is not None and weights in ('auto', 'ema'):
        return obj[ema], f'EMA weights ({ema!r})'
    if model is not None:
        return obj[model], f'model weights ({model!r})'
    return obj, 'model weights (bare state dict)'


def state_dict_of(obj: Mapping, source: str = 'checkpoint', weights: str = 'auto') -> StateDict:
    """The backbone weights inside an authors' file (``model``, and ``state_dict_ema`` /
    ``model_ema`` for EMA weights, chosen by ``weights``), an mmengine checkpoint (``state_dict``,
    keys with or without ``backbone.``) or a bare state dict."""
    return tensors_of(select_weights(obj, weights, source)[0], source)


def tensors_of(obj: Mapping, source: str, within: str | None = 'backbone.') -> StateDict:
    """``obj``'s entries without a DataParallel ``module.`` prefix; when some keys start with
    ``within`` (a detector's ``backbone.``), only those, without it. Raises CheckpointError when
    an entry is not a tensor or nothing is left."""
    state = {k[len('module.'):] if k.startswith('module.') else k: v for k, v in obj.items()}
    if within and any(k.startswith(within) for k in state):
        state = {k[len(within):]: v for k, v in state.items() if k.startswith(within)}
    bad = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if not state or bad:
        raise CheckpointError(f'{source} is not a state dict of tensors'
                              + (f' (non-tensor entries: {bad[:5]})' if bad else ' (it is empty)') + '.')
    return state


def with_prefix(state: Mapping[str, Any], prefix: str, source: str) -> dict[str, Any]:
    """The entries under ``prefix`` with it removed, as mmengine's ``Pretrained(prefix=...)`` takes a
    backbone out of a detector's checkpoint."""
    prefix = prefix if prefix.endswith('.') else prefix + '.'
    picked = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    if not picked:
        raise CheckpointError(f'{source} has no weights under prefix={prefix!r} (its keys start with '
                              f'{sorted({k.split(".")[0] + "." for k in state})[:8]}).')
    return picked
