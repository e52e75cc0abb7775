"""Reading checkpoints into an InLine backbone, strictly and with a clear report."""
import os
import pickle
import zipfile
from typing import Dict, List, Mapping, Tuple

import torch
from mmengine.logging import print_log
from torch import nn

StateDict = Dict[str, torch.Tensor]
# Parameters a classification checkpoint cannot hold: their absence is expected.
OPTIONAL_PREFIXES = ('out_norms.',)


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read, or does not fit the backbone."""


def read_checkpoint(path: str, trusted: bool = False) -> Mapping:
    """``torch.load`` with ``weights_only=True`` and errors that say what to do.

    ``trusted=True`` unpickles arbitrary objects: only for a file from a source you
    trust, and only through ``tools/convert_checkpoint.py --trusted`` (one file, once).
    """
    path = os.path.expanduser(str(path))
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f'pretrained checkpoint {path!r} (absolute: {os.path.abspath(path)!r}) does not exist. '
            f'Download the authors\' ImageNet checkpoint for this variant (table in checkpoints/README.md) '
            f'and save it there, point init_cfg.checkpoint at it (e.g. --cfg-options '
            f'model.backbone.init_cfg.checkpoint=PATH), or train from scratch with '
            f'--cfg-options model.backbone.init_cfg=None.')
    try:
        return torch.load(path, map_location='cpu', weights_only=not trusted)
    except pickle.UnpicklingError as exc:
        if 'Unsupported global' in str(exc) or 'GLOBAL' in str(exc):
            raise CheckpointError(
                f'{path!r} holds Python objects besides tensors (e.g. a training config), which '
                f'weights_only loading refuses ({str(exc).splitlines()[0][:200]}). If you trust the file, '
                f'extract its weights once: python tools/convert_checkpoint.py --trusted {path} '
                f'OUT.pth, then use OUT.pth.') from exc
        raise _unreadable(path, exc) from exc
    except (EOFError, RuntimeError, zipfile.BadZipFile, ValueError, KeyError) as exc:
        raise _unreadable(path, exc) from exc


def _unreadable(path: str, exc: Exception) -> CheckpointError:
    return CheckpointError(
        f'{path!r} is not a readable PyTorch checkpoint ({type(exc).__name__}: {str(exc)[:200]}). '
        f'It may be truncated (an interrupted download or write) or not a checkpoint at all: '
        f'download or save it again.')


def state_dict_of(obj: Mapping, source: str = 'checkpoint') -> StateDict:
    """The backbone weights inside an authors' file (``model``), an mmengine checkpoint
    (``state_dict``, keys with or without ``backbone.``) or a bare state dict."""
    if not isinstance(obj, Mapping):
        raise CheckpointError(f'{source} holds a {type(obj).__name__}, not a checkpoint dict.')
    for key in ('state_dict', 'model'):
        if isinstance(obj.get(key), Mapping):
            obj = obj[key]
            break
    state = {k[len('module.'):] if k.startswith('module.') else k: v for k, v in obj.items()}
    if any(k.startswith('backbone.') for k in state):
        state = {k[len('backbone.'):]: v for k, v in state.items() if k.startswith('backbone.')}
    bad = [k for k, v in state.items() if not isinstance(v, torch.Tensor)]
    if not state or bad:
        raise CheckpointError(f'{source} is not a state dict of tensors'
                              + (f' (non-tensor entries: {bad[:5]})' if bad else ' (it is empty)') + '.')
    return state


def compare(model_state: Mapping[str, torch.Tensor], state: StateDict) -> Tuple[List[str], List[str], List[str]]:
    """(missing, unexpected, shape mismatches as 'key: checkpoint (..) vs model (..)')."""
    missing = [k for k in model_state if k not in state and not k.startswith(OPTIONAL_PREFIXES)]
    unexpected = [k for k in state if k not in model_state and not k.startswith(OPTIONAL_PREFIXES)]
    mismatched = [f'{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(model_state[k].shape)}'
                  for k in state if k in model_state and state[k].shape != model_state[k].shape]
    return missing, unexpected, mismatched


def load_pretrained(model: nn.Module, path: str) -> List[str]:
    """Loads ``path`` into ``model`` (an InLine backbone) after converting the authors' layout.

    Raises ``CheckpointError`` naming every missing, unexpected or shape-mismatched key;
    returns the keys dropped as unused for dense prediction (logged in one line).
    """
    state, dropped = model.convert_pretrained(state_dict_of(read_checkpoint(path), repr(path)))
    model_state = model.state_dict()
    missing, unexpected, mismatched = compare(model_state, state)
    if missing or unexpected or mismatched:
        lines = [f'{model.__class__.__name__}: checkpoint {path!r} does not fit this backbone '
                 f'(is it another variant? check arch / depths / embed_dims / attn_type):']
        for title, keys in (('missing', missing), ('unexpected', unexpected), ('shape mismatch', mismatched)):
            if keys:
                shown = ', '.join(keys[:20]) + (f', ... ({len(keys) - 20} more)' if len(keys) > 20 else '')
                lines.append(f'  {title} ({len(keys)}): {shown}')
        raise CheckpointError('\n'.join(lines))
    unused = [k for k in state if k not in model_state]  # optional output norms this config does not use
    usable = {k: v for k, v in state.items() if k in model_state}
    model.load_state_dict(usable, strict=False)
    dropped = dropped + unused
    fresh = [k for k in model_state if k not in usable]
    print_log(f'{model.__class__.__name__}: loaded {len(usable)} tensors from {path}; dropped {len(dropped)} '
              f'unused by dense prediction ({_summary(dropped)}); newly initialised: {_summary(fresh)}',
              logger='current')
    return dropped


def _summary(keys: List[str]) -> str:
    if not keys:
        return 'none'
    groups: Dict[str, int] = {}
    for k in keys:
        name = k.rsplit('.', 1)[0].split('.')[0] if k.startswith(('head', 'out_norms')) else k.rsplit('.', 1)[-1]
        groups[name] = groups.get(name, 0) + 1
    return ', '.join(f'{n} x{c}' if c > 1 else n for n, c in groups.items())
