"""The one strict loader: every path that puts weights into a model goes through it.

The OpenMMLab ``init_cfg``, timm's and smp's ``pretrained``, ``build_classifier`` and deploy load
through :func:`load_file` (a checkpoint name) or :func:`load_state` (tensors in hand); the
``load_from`` / resume checks, where mmengine itself copies the weights, use its
:func:`check_weights` and :func:`fit_report`. Once, for all of them:

1. resolve the name and read the file safely (``sources.resolve``, ``reading.read_checkpoint``);
2. pick the model or the EMA weights, take ``prefix``, drop ``module.`` (``reading``);
3. the caller's conversion (the authors' key layout -> ours);
4. refuse non-tensor entries, NaN / inf, and integer tensors for floating-point weights;
5. compare with the model: every missing, unexpected or other-shape key is an error, except
   what the caller declares legitimate (:class:`Allowed`: a head of another class count, the
   output norms a classification checkpoint lacks);
6. ``load_state_dict(strict=True)``; one log line says what was loaded, dropped, kept fresh.

Errors end with the caller's advice (:class:`~inline_dense.checkpoint.errors.Advice`).
"""
import logging
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol, cast

import torch
from torch import nn

from .. import variants
from ..typing import StateDict
from .errors import CORE, Advice, CheckpointError
from .finite import check_finite
from .reading import read_checkpoint, select_weights, tensors_of, with_prefix
from .sources import PUBLISHED, SCHEME, resolve, variant_of

log = logging.getLogger(__name__)

OUTPUT_NORMS = ('out_norms.',)  # per-stage output norms: a classification checkpoint has none
EXAMPLES = 8

Convert = Callable[[StateDict], tuple[StateDict, list[str]]]
"""A layout conversion: state -> (state in the model's keys, keys dropped as unused)."""


class Convertible(Protocol):
    """A model that converts the authors' key layout itself (the InLine backbones). One may also
    have ``adapt_pretrained(state) -> state``: the converted weights fitted to its settings
    (InLine-DeiT: a position grid of another resolution resampled)."""

    def convert_pretrained(self, state_dict: StateDict) -> tuple[StateDict, list[str]]: ...


def converter(model: nn.Module) -> Convert:
    """``model``'s conversion of a checkpoint: its ``convert_pretrained``, then its ``adapt_pretrained``
    where it has one."""
    convert = cast(Convertible, model).convert_pretrained
    adapt: Callable[[StateDict], StateDict] | None = getattr(model, 'adapt_pretrained', None)
    if adapt is None:
        return convert

    def convert_and_adapt(state: StateDict) -> tuple[StateDict, list[str]]:
        converted, dropped = convert(state)
        return adapt(converted), dropped
    return convert_and_adapt


class Allowed(NamedTuple):
    """What may legitimately differ between a checkpoint and its model, as key prefixes."""
    missing: tuple[str, ...] = ()  # model keys the checkpoint may lack: they keep their initial values
    unused: tuple[str, ...] = ()   # checkpoint keys the model may lack: dropped
    resized: tuple[str, ...] = ()  # checkpoint keys of another shape (a head of another class count): dropped, logged


NOTHING = Allowed()
"""The default: every key must match (a whole model's checkpoint)."""


class Loaded(NamedTuple):
    """What :func:`load_state` did, by key."""
    loaded: list[str]
    dropped: list[str]  # checkpoint keys not loaded (unused or resized)
    fresh: list[str]    # model keys the checkpoint did not give


class IntegerWeightsError(CheckpointError):
    """A checkpoint that stores floating-point weights as integer tensors."""


def compare(model_state: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor],
            allowed: Allowed = NOTHING) -> tuple[list[str], list[str], list[str]]:
    """(missing, unexpected, shape mismatches as 'key: checkpoint (..) vs model (..)'), less ``allowed``."""
    missing = [k for k in model_state if k not in state and not k.startswith(allowed.missing)]
    unexpected = [k for k in state if k not in model_state and not k.startswith(allowed.unused)]
    mismatched = [f'{k}: checkpoint {tuple(state[k].shape)} vs model {tuple(model_state[k].shape)}'
                  for k in state if k in model_state and state[k].shape != model_state[k].shape
                  and not k.startswith(allowed.resized)]
    return missing, unexpected, mismatched


def _examples(keys: list[str]) -> str:
    """'(backbone 30, roi_head 12): k1, k2, ...': counts per top-level module, then examples taken
    from each module in turn."""
    groups: dict[str, list[str]] = {}
    for k in keys:
        groups.setdefault(k.split('.')[0].split(':')[0], []).append(k)
    picks: list[str] = []
    for rank in range(max(len(g) for g in groups.values())):
        picks += [g[rank] for g in groups.values() if rank < len(g)]
    more = f', ... ({len(keys) - EXAMPLES} more)' if len(keys) > EXAMPLES else ''
    counts = ', '.join(f'{name} {len(g)}' for name, g in groups.items())
    return f'({counts}): {", ".join(picks[:EXAMPLES])}{more}'


def fit_report(model_state: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor],
               allowed: Allowed = NOTHING) -> list[str]:
    """Lines describing what does not match, [] when everything does."""
    missing, unexpected, mismatched = compare(model_state, state, allowed)
    return [f'  {len(keys)} {title} {_examples(keys)}'
            for title, keys in ((f'of the model\'s {len(model_state)} weights missing from the checkpoint', missing),
                                ('in the checkpoint that the model does not have', unexpected),
                                ('with another shape', mismatched)) if keys]


def integer_weights(state: Mapping[str, Any], model_state: Mapping[str, torch.Tensor]) -> list[str]:
    """``'key (torch.int64 for torch.float32)'`` for every entry stored as an integer (or bool)
    tensor where the model has a floating-point one: ``load_state_dict`` would cast it silently."""
    return [f'{k} ({v.dtype} for {model_state[k].dtype})' for k, v in state.items()
            if isinstance(v, torch.Tensor) and k in model_state and model_state[k].is_floating_point()
            and not (v.is_floating_point() or v.is_complex())]


def check_weights(state: Mapping[str, Any], source: str, fix: str,
                  model_state: Mapping[str, torch.Tensor] | None = None, integer_fix: str | None = None) -> None:
    """Refuses NaN / inf (:class:`~inline_dense.checkpoint.finite.NonFiniteWeightsError`) and, given
    the model's state, integer tensors for its floating-point weights (:class:`IntegerWeightsError`);
    ``fix`` (``integer_fix`` for the latter, when given) ends the message."""
    check_finite(state, source, fix)
    wrong = integer_weights(state, model_state) if model_state is not None else []
    if wrong:
        more = f', ... ({len(wrong) - EXAMPLES} more)' if len(wrong) > EXAMPLES else ''
        raise IntegerWeightsError(f'{source} stores {len(wrong)} floating-point weight(s) as integers: '
                                  f'{", ".join(wrong[:EXAMPLES])}{more}. Loading would truncate them (a weight '
                                  f'below 1 becomes 0): the file was written wrongly. {integer_fix or fix}')


def load_state(model: nn.Module, state: Mapping[str, torch.Tensor], source: str, *, allowed: Allowed = NOTHING,
               advice: Advice = CORE, why: str = '') -> Loaded:
    """Checks ``state`` against ``model`` (see the module docstring) and loads it strictly.

    ``allowed``: what may differ; ``advice``: how the caller's user fixes a refused file; ``why``:
    what a misfit suggests (``'is it another variant? ...'``). Model keys the checkpoint does not
    give (only ``allowed.missing`` ones) keep their current values.
    """
    model_state = model.state_dict()
    name = type(model).__name__
    check_weights(state, source, advice.ending('download or convert the file again'), model_state)
    resized = [k for k in state if k in model_state and k.startswith(allowed.resized)
               and state[k].shape != model_state[k].shape]
    if resized:
        theirs = ', '.join(f'{k} {tuple(state[k].shape)}' for k in resized)
        ours = ', '.join(str(tuple(model_state[k].shape)) for k in resized)
        log.warning(f'{name}: not loading {theirs} of {source}: the model has another shape there ({ours}, e.g. '
                    f'another num_classes), so it keeps its fresh initialisation.')
    state = {k: v for k, v in state.items() if k not in resized}
    lines = fit_report(model_state, state, allowed)
    if lines:
        raise CheckpointError('\n'.join([f'{name}: checkpoint {source} does not fit this {why or "model"}:', *lines,
                                         '  ' + advice.ending()]))
    usable = {k: v for k, v in state.items() if k in model_state}
    fresh = [k for k in model_state if k not in usable]
    model.load_state_dict({**{k: model_state[k] for k in fresh}, **usable}, strict=True)
    return Loaded(list(usable), [k for k in state if k not in model_state] + resized, fresh)


def load_file(model: nn.Module, checkpoint: str | Mapping[str, Any], *, convert: Convert | None = None,
              within: str | None = 'backbone.', weights: str = 'auto', prefix: str = '', map_location: Any = 'cpu',
              allowed: Allowed = NOTHING, advice: Advice = CORE, why: str = '',
              example: str = variants.EXAMPLE) -> Loaded:
    """Loads ``checkpoint`` (``inline://<variant>``, an http(s) or file:// URL, or a path) into ``model``.

    ``convert``: the model's layout conversion; ``within``: the key prefix a whole model's checkpoint
    holds ``model``'s weights under (a detector's ``backbone.``; None: keys as they are);
    ``weights``: 'auto' | 'model' | 'ema' (see ``reading.select_weights``); ``prefix``,
    ``map_location``: as in mmengine's ``Pretrained`` init; ``allowed``, ``advice``, ``why``: as in
    :func:`load_state`; ``example``: the short name a missing-file message suggests.
    """
    if isinstance(checkpoint, Mapping):  # a checkpoint already in memory (timm's pretrained_cfg['state_dict'])
        obj, source, origin = checkpoint, 'the state dict passed', 'the state dict passed'
    else:
        path = resolve(checkpoint, advice=advice)
        obj, source = read_checkpoint(path, map_location=map_location, example=example, advice=advice), repr(path)
        origin = path if path == checkpoint else f'{checkpoint} ({path})'
    chosen, which = select_weights(obj, weights, source)
    if prefix:
        chosen = with_prefix(chosen, prefix, source)
    state, dropped = (convert or _as_is)(tensors_of(chosen, source, within))
    done = load_state(model, state, source, allowed=allowed, advice=advice, why=why)
    dropped = dropped + done.dropped
    log.info(f'{type(model).__name__}: loaded {len(done.loaded)} tensors, {which}, from {origin}; '
             f'dropped {len(dropped)} unused ({_summary(dropped)}); newly initialised: {_summary(done.fresh)}')
    return done._replace(dropped=dropped)


def _as_is(state: StateDict) -> tuple[StateDict, list[str]]:
    return state, []


def check_published_family(checkpoint: Any, family: str | None, what: str) -> None:
    """Raises :class:`CheckpointError` when ``checkpoint`` names a published variant (``inline://<variant>``
    or its URL) of another family than ``family`` (the model's; None: not known, nothing checked), before
    anything is downloaded. ``what``: the model, in the message."""
    if family is None or not isinstance(checkpoint, str):
        return
    if checkpoint.startswith(SCHEME):
        name: str | None = variant_of(checkpoint)
    else:
        name = next((v for v, p in PUBLISHED.items() if p.url is not None and p.url == checkpoint), None)
    if name is None or variants.variant(name).family == family:
        return
    own = [SCHEME + v for v, entry in variants.VARIANTS.items() if entry.family == family]
    raise CheckpointError(f'{checkpoint} holds {variants.title(name)} weights, but {what} is an InLine-'
                          f'{variants.spec_of(variants.example_of(family)).title} model, which they do not fit '
                          f'(nothing was downloaded). Use one of {", ".join(own)}, or build the model of '
                          f'{variants.title(name)}.')


def load_pretrained(model: nn.Module, checkpoint: str, weights: str = 'auto', prefix: str = '',
                    map_location: Any = 'cpu', advice: Advice = CORE) -> list[str]:
    """Loads ``checkpoint`` into ``model`` (an InLine backbone) after converting the authors' layout.

    ``checkpoint``: ``inline://<variant>``, a URL (resolved to a local file, downloaded into the
    cache on first use; see ``sources.resolve``) or a path. ``weights``: 'auto' | 'model' | 'ema'
    (``init_weights`` passes ``init_cfg``'s ``weights``). ``prefix``, ``map_location``: as in
    mmengine's ``Pretrained`` init (``prefix='backbone.'`` takes the backbone out of a detector or
    segmentor checkpoint). The output norms (``out_norms.``) may be missing (a classification
    checkpoint) or unused (this config's ``out_indices``). Raises ``CheckpointError`` naming every
    missing, unexpected or shape-mismatched key; returns the keys dropped as unused. ``advice``: how
    the errors end, in the caller's terms (plain PyTorch's by default; the OpenMMLab adapter passes
    ``init_cfg``'s). InLine-DeiT's position grid is resampled to the model's when the checkpoint's
    differs (``adapt_pretrained``, logged).
    """
    check_published_family(checkpoint, variants.family_of_class(type(model).__name__), type(model).__name__)
    return load_file(model, checkpoint, convert=converter(model), weights=weights,
                     prefix=prefix, map_location=map_location,
                     allowed=Allowed(missing=OUTPUT_NORMS, unused=OUTPUT_NORMS), advice=advice,
                     why='backbone (is it another variant? check arch / depths / embed_dims / attn_type)',
                     example=variants.example_of_class(type(model).__name__)).dropped


def _summary(keys: list[str]) -> str:
    if not keys:
        return 'none'
    groups: dict[str, int] = {}
    for k in keys:
        name = k.rsplit('.', 1)[0].split('.')[0] if k.startswith(('head', 'out_norms')) else k.rsplit('.', 1)[-1]
        groups[name] = groups.get(name, 0) + 1
    return ', '.join(f'{n} x{c}' if c > 1 else n for n, c in groups.items())
