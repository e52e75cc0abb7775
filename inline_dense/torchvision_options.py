"""torchvision's builder options for :func:`inline_dense.torchvision_detection.inline_fpn_backbone`, as
our settings: ``weights`` (torchvision's convention) as the checkpoint to load, ``trainable_layers`` as
``frozen_stages``, ``returned_layers`` as ``out_indices``; and the checkpoint errors' advice in
``weights`` terms."""
import enum
import os
from collections.abc import Sequence
from typing import Any

from torchvision.models import WeightsEnum

from . import variants
from .checkpoint import SCHEME, Advice

WEIGHT_NAMES = ('imagenet', 'imagenet1k', 'imagenet1k_v1', 'default')  # all mean the authors' ImageNet-1K file


def checkpoint_of(variant: str, weights: Any) -> str | None:
    """What ``weights`` (torchvision's convention) names for ``variant``: None (from scratch), or
    the checkpoint to load (``inline://<variant>`` for the authors' ImageNet weights)."""
    if weights is None or weights is False:
        return None
    if weights is True:
        return SCHEME + variant
    name = getattr(weights, 'name', None)  # an enum member, e.g. torchvision's ResNet50_Weights.DEFAULT
    if isinstance(weights, enum.Enum) and isinstance(name, str):
        if name.lower() in WEIGHT_NAMES and not isinstance(weights, WeightsEnum):
            return SCHEME + variant
        raise ValueError(f'inline_fpn_backbone: weights={weights} belongs to another model '
                         f'({type(weights).__name__}); the InLine backbones take weights=True, \'imagenet\' '
                         f'(the authors\' ImageNet-1K file of {variant}), a checkpoint path, URL or inline:// name, '
                         f'or None.')
    if not isinstance(weights, (str, os.PathLike)):
        raise TypeError(f'inline_fpn_backbone: weights={weights!r} ({type(weights).__name__}) is not a weights '
                        f'choice; use None, True / \'imagenet\', or a checkpoint path, URL or inline:// name.')
    text = os.fspath(weights)
    if text.lower() in WEIGHT_NAMES:
        return SCHEME + variant
    if '://' in text:
        return text
    if not os.path.isfile(os.path.expanduser(text)):
        looks_like_path = os.sep in text or '.' in os.path.basename(text)
        what = f'no file {os.path.abspath(os.path.expanduser(text))} exists' if looks_like_path else \
            'it is no weights name'
        raise FileNotFoundError(f'inline_fpn_backbone: weights={text!r}: {what}. Use weights=True or '
                                f'\'imagenet\' for the authors\' ImageNet-1K file of {variant} '
                                f'(inline://{variant}, downloaded on first use), a checkpoint path or URL, or '
                                f'weights=None to train from scratch.')
    return text


def trainable_to_frozen(trainable_layers: int, num_stages: int) -> int:
    """torchvision's ``trainable_layers`` (counted from the last stage, the stem last) as our
    ``frozen_stages`` (-1 none, 0 the stem, k the stem and the first k stages)."""
    if isinstance(trainable_layers, bool) or not isinstance(trainable_layers, int) or \
            not 0 <= trainable_layers <= num_stages + 1:
        raise ValueError(f'inline_fpn_backbone: trainable_layers={trainable_layers!r} must be an int in '
                         f'[0, {num_stages + 1}] (the {num_stages} stages counted from the last, then the patch '
                         f'embedding; {num_stages + 1} trains everything).')
    return num_stages - trainable_layers


def returned_to_out_indices(returned_layers: Sequence[int], strides: Sequence[int]) -> tuple[int, ...]:
    """torchvision's ``returned_layers`` (1-based, ``layer1`` ..) as our ``out_indices`` (0-based)
    over the backbone's outputs at ``strides``."""
    n, layers = len(strides), list(returned_layers)
    if not layers or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= n for v in layers) \
            or layers != sorted(set(layers)):
        raise ValueError(f'inline_fpn_backbone: returned_layers={returned_layers!r}: each entry must be in '
                         f'[1, {n}], increasing, at least one (the outputs at strides '
                         f'{", ".join(map(str, strides))}).')
    return tuple(v - 1 for v in layers)


def torchvision_advice(variant: str) -> Advice:
    """The errors' ending for a user of :func:`inline_fpn_backbone` (its ``weights`` argument)."""
    return Advice(f'pass a checkpoint of {variant} as inline_fpn_backbone(weights=\'/path/to/'
                  f'{variants.file_name(variant)}\') (or its URL)', 'weights=None to train the backbone from scratch',
                  "weights='inline://{name}'")
