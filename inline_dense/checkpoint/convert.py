"""One-off conversion of an authors' checkpoint into a backbone checkpoint."""
from typing import Dict, Tuple

import torch

from .loading import CheckpointError, read_checkpoint, state_dict_of

StateDict = Dict[str, torch.Tensor]


def detect_backbone(state: StateDict) -> str:
    """'InLineSwin' or 'InLinePVT' from the key layout (authors' or ours)."""
    keys = list(state)
    if any(k.startswith('layers.') for k in keys) or any('.downsample.reduction.' in k for k in keys):
        return 'InLineSwin'
    if any(k.startswith(('block1.', 'patch_embed1.', 'pos_embed1')) for k in keys) or \
            any(k.startswith('stages.') and '.pos_embed' in k for k in keys):
        return 'InLinePVT'
    raise CheckpointError('cannot tell whether this checkpoint holds InLine-Swin or InLine-PVT weights '
                          f'(first keys: {keys[:5]}); pass --backbone explicitly.')


def convert_file(src: str, dst: str, backbone: str = 'auto', trusted: bool = False) -> Tuple[str, int, int]:
    """Reads ``src`` (authors' layout), writes ``{'state_dict': ..., 'meta': ...}`` to ``dst``.

    ``trusted`` lets the source hold arbitrary pickled objects (see ``read_checkpoint``);
    the file written holds tensors and plain data only. Returns (backbone, tensors, dropped keys).
    """
    from ..models import InLinePVT, InLineSwin
    state = state_dict_of(read_checkpoint(src, trusted=trusted), repr(src))
    name = detect_backbone(state) if backbone == 'auto' else backbone
    classes = {'InLineSwin': InLineSwin, 'InLinePVT': InLinePVT}
    if name not in classes:
        raise ValueError(f'unknown backbone {name!r}; use one of {sorted(classes)} or auto.')
    converted, dropped = classes[name].convert_pretrained(state)
    torch.save({'state_dict': converted, 'meta': {'converted_from': str(src), 'backbone': name,
                                                  'dropped': dropped}}, dst)
    return name, len(converted), len(dropped)
