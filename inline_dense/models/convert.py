"""One-off conversion of an authors' checkpoint into a backbone checkpoint.

It sits with the models, above the checkpoint reading it uses: each family's spec knows the keys only
its checkpoints have (``key_patterns``), its backbone class the conversion (``convert_pretrained``,
the family's ``convert.py``)."""
import re

from .. import registry
from ..checkpoint import CheckpointError, read_checkpoint, resolve, select_weights, state_dict_of
from ..checkpoint.saving import check_output_path, save_converted
from ..families import backbone_class
from ..typing import StateDict


def detect_backbone(state: StateDict) -> str:
    """The backbone class name (its family spec's ``class_name``) from the key layout (authors' or ours), by the
    families' ``key_patterns`` (:mod:`inline_dense.registry`)."""
    family = registry.detect_family(state)
    if family is None:
        titles = ', '.join(f'InLine-{spec.title}' for spec in registry.FAMILIES.values())
        raise CheckpointError(f'cannot tell which of {titles} this checkpoint holds (first keys: {list(state)[:5]}); '
                              f'pass --backbone explicitly.')
    return registry.FAMILIES[family].class_name


# InLine attention's own weights (``InLineAttention.residual``, its local branch), in the authors' layout
# and ours, in every family: a checkpoint without them holds no InLine attention (e.g. a softmax timm ViT,
# whose other keys match InLine-DeiT's patterns)
INLINE_ATTENTION_KEY = r'(^|\.)attns?(\.\d+)?\.residual\.\d+\.weight$'  # CSwin: attns.<branch>.residual


def check_inline(state: StateDict, backbone: str, source: str) -> None:
    """Raises :class:`CheckpointError` when ``state`` has none of InLine attention's own weights."""
    if not any(re.search(INLINE_ATTENTION_KEY, k) for k in state):
        raise CheckpointError(f'{source} holds no InLine attention weights (no key like '
                              f'blocks.0.attn.residual.0.weight among its {len(state)}), so it is not an InLine '
                              f'checkpoint: its keys match {backbone}\'s layout, but a softmax model\'s weights would '
                              f'leave every InLine block unloaded. Convert the authors\' InLine checkpoint instead '
                              f'(checkpoints/README.md).')


def check_family(state: StateDict, backbone: str, source: str) -> str:
    """``backbone`` when the keys of ``state`` are that family's (or tell no family); otherwise raises
    :class:`CheckpointError` naming both families: converting with another family's layout would
    leave the keys unconverted and drop weights."""
    try:
        found = detect_backbone(state)
    except CheckpointError:
        return backbone
    if found != backbone:
        raise CheckpointError(f'{source} holds {found} weights (by its keys, e.g. {next(iter(state))!r}), not '
                              f'{backbone}: converting it as {backbone} would leave its keys unconverted. Pass '
                              f'--backbone {found} (or --backbone auto), or the {backbone} checkpoint you meant.')
    return backbone


def convert_file(src: str, dst: str, backbone: str = 'auto', trusted: bool = False,
                 weights: str = 'auto') -> tuple[str, int, int]:
    """Reads ``src`` (authors' layout; a path, ``inline://<variant>`` or an http(s) URL), writes
    ``{'state_dict': ..., 'meta': ...}`` to ``dst`` (a ``.safetensors`` ``dst``: the tensors, with
    the meta in the file's header; see ``saving.save_converted``).

    ``weights``: 'auto' (EMA if the file has it) | 'model' | 'ema'. ``trusted`` unpickles
    arbitrary objects (see ``read_checkpoint``; rarely needed: configs and optimizer state load as
    data without it); the file written holds tensors and plain data only.
    Returns (backbone, tensors, dropped keys).
    """
    path = resolve(src)
    check_output_path(dst, path)
    chosen, which = select_weights(read_checkpoint(path, trusted=trusted), weights, repr(src))
    state = state_dict_of(chosen, repr(src), 'model')
    if backbone != 'auto':
        registry.family_by_class(backbone)  # the name check
    name = detect_backbone(state) if backbone == 'auto' else check_family(state, backbone, repr(src))
    check_inline(state, name, repr(src))
    converted, dropped = backbone_class(registry.family_by_class(name)).convert_pretrained(state)
    save_converted(converted, {'converted_from': str(src), 'backbone': name, 'dropped': dropped, 'weights': which},
                   dst)
    return name, len(converted), len(dropped)
