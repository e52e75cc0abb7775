"""Parsing and validation of the architecture settings every backbone shares.

Every family's settings are checked for type and range here, in one table (``OPTION_KINDS``),
before anything is built: a wrong value gets a one-line error naming it and the fix, instead of
being taken for something else (``out_norm='no'`` is truthy, ``frozen_stages=True`` is 1).
"""
import itertools
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast


def resolve_arch(arch: str | Mapping[str, Any], presets: Mapping[str, Mapping[str, Any]], backbone: str,
                 overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A preset name (e.g. 'tiny') or a full dict, with the non-None ``overrides`` applied."""
    keys = sorted(next(iter(presets.values())))
    if isinstance(arch, Mapping):
        missing = [k for k in keys if k not in arch]
        if missing:
            raise ValueError(f'{backbone}: a custom arch dict needs the keys {missing}.')
        cfg = dict(arch)
    elif isinstance(arch, str) and arch in presets:
        cfg = dict(presets[arch])
    else:
        raise ValueError(f'{backbone}: unknown arch {arch!r}; use one of {sorted(presets)} '
                         f'or pass a dict with the keys {keys}.')
    cfg.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return cfg


def parse_attn_type(attn_type: str, depths: Sequence[int], backbone: str,
                    allow_mixed: bool) -> list[list[str]]:
    """'IIMS2' -> per stage, per block 'I' (InLine) or 'S' (softmax).

    One letter per stage: I, S, or (when ``allow_mixed``) M; the digits after the
    letters give the number of leading InLine blocks of the single M stage.
    """
    n = len(depths)
    if not isinstance(attn_type, str):
        raise ValueError(f"{backbone}: attn_type must be a string such as 'IIIS' (one letter per stage), "
                         f'got {attn_type!r}.')
    letters, digits = attn_type[:n], attn_type[n:]
    hint = (f"one letter per stage ({n} stages) from {{I, S{', M' if allow_mixed else ''}}}"
            + (", and after them the number of InLine blocks of the M stage, e.g. 'IIMS2'" if allow_mixed else ''))
    if len(letters) != n:
        raise ValueError(f'{backbone}: attn_type {attn_type!r} is too short; it needs {hint}.')
    allowed = 'ISM' if allow_mixed else 'IS'
    bad = sorted({ch for ch in letters if ch not in allowed})
    if bad:
        raise ValueError(f'{backbone}: attn_type {attn_type!r} has unknown letter(s) {bad}; it needs {hint}.')
    num_m = letters.count('M')
    if num_m > 1:
        raise ValueError(f'{backbone}: attn_type {attn_type!r} has {num_m} M stages; at most one is supported.')
    if num_m == 0 and digits:
        raise ValueError(f'{backbone}: attn_type {attn_type!r} has trailing {digits!r} but no M stage; '
                         f'it needs {hint}.')
    if num_m == 1:
        stage = letters.index('M')
        if not digits.isdigit() or not 0 < int(digits) < depths[stage]:
            raise ValueError(
                f'{backbone}: attn_type {attn_type!r}: the M stage {stage} has {depths[stage]} blocks, so the '
                f'number after the letters must be an integer from 1 to {depths[stage] - 1} (got {digits!r}).')
    out = []
    for stage, ch in enumerate(letters):
        if ch == 'M':
            k = int(digits)
            out.append(['I'] * k + ['S'] * (depths[stage] - k))
        else:
            out.append([ch] * depths[stage])
    return out


def check_out_indices(out_indices: Sequence[int], num_stages: int, backbone: str) -> tuple[int, ...]:
    """``out_indices`` as a tuple: a non-empty, strictly increasing sequence of stage numbers.

    An unsorted or repeated one is refused, not reordered: the outputs come in stage order, and a
    neck that expects them in the order written would silently get them in another."""
    if _is_int(out_indices):
        raise TypeError(f'{backbone}: out_indices={out_indices!r} is one int; write a tuple, '
                        f'out_indices=({out_indices},), for that stage alone.')
    if not isinstance(out_indices, Sequence) or isinstance(out_indices, str) or \
            not all(_is_int(i) for i in out_indices):
        raise TypeError(f'{backbone}: out_indices={out_indices!r} must be a tuple of stage numbers (ints), '
                        f'e.g. {tuple(range(num_stages))}.')
    idx = tuple(int(i) for i in out_indices)
    bad = [i for i in idx if not 0 <= i < num_stages]
    if not idx or bad:
        raise ValueError(f'{backbone}: out_indices {tuple(out_indices)} must be a non-empty subset of '
                         f'{tuple(range(num_stages))}.')
    if any(a >= b for a, b in itertools.pairwise(idx)):
        raise ValueError(f'{backbone}: out_indices={idx} must be increasing without repeats (the outputs come '
                         f'in stage order); write out_indices={tuple(sorted(set(idx)))}.')
    return idx


def check_stage_lists(cfg: Mapping[str, Sequence], num_stages: int, backbone: str) -> None:
    for key, value in cfg.items():
        if len(value) != num_stages:
            raise ValueError(f'{backbone}: {key}={list(value)} has {len(value)} entries; '
                             f'it needs one per stage ({num_stages}).')


def to_2tuple_size(value: int | Sequence[int], name: str, backbone: str) -> tuple[int, int]:
    """An int or a 1- or 2-sequence of ints -> (h, w), as mmdet's PVT and mmseg's Swin accept.

    Not timm's ``to_2tuple``, which passes any iterable through unchecked: a wrong value here
    gets an error naming the setting."""
    if _is_int(value):
        return cast(int, value), cast(int, value)
    if isinstance(value, Sequence) and len(value) in (1, 2) and all(_is_int(v) for v in value):
        return (value[0], value[0]) if len(value) == 1 else (value[0], value[1])
    raise TypeError(f'{backbone}: {name} must be an int or a tuple of 1 or 2 ints, got {value!r}.')


# ----------------------------------------------------------------------------- type and range
def _is_int(value: Any) -> bool:
    """An integer that is not a bool (``True`` is an int to Python, never a size here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value


def _positive_int(value: Any) -> bool:
    return _is_int(value) and value > 0


def _positive_number(value: Any) -> bool:
    return _is_number(value) and value > 0


def _probability(value: Any) -> bool:
    return _is_number(value) and 0 <= value < 1


def _sequence_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def checked(value: Any) -> bool:
        return isinstance(value, (list, tuple)) and len(value) > 0 and all(check(v) for v in value)
    return checked


def _one_or_sequence_of(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    many = _sequence_of(check)
    return lambda value: check(value) or many(value)


# setting -> (check, what it must be, an example of a good value)
OPTION_KINDS: dict[str, tuple[Callable[[Any], bool], str, str]] = {
    'out_norm': (lambda v: isinstance(v, bool), 'True or False (a bool)', 'True'),
    'with_cp': (lambda v: isinstance(v, bool), 'True or False (a bool)', 'False'),
    'qkv_bias': (lambda v: isinstance(v, bool), 'True or False (a bool)', 'True'),
    'with_cls_token': (lambda v: isinstance(v, bool), 'True or False (a bool)', 'True'),
    'depth': (_positive_int, 'a positive int (the number of blocks)', '12'),
    'frozen_stages': (_is_int, 'an int (-1: nothing frozen)', '-1'),
    'in_channels': (_positive_int, 'a positive int', '3'),
    'window_size': (_positive_int, 'a positive int', '7'),
    'patch_size': (_positive_int, 'a positive int', '4'),
    'mlp_ratio': (_positive_number, 'a positive number', '4.0'),
    'drop_rate': (_probability, 'in [0, 1) (a number)', '0.0'),
    'attn_drop_rate': (_probability, 'in [0, 1) (a number)', '0.0'),
    'drop_path_rate': (_probability, 'in [0, 1) (a number: the chance of skipping the last block; 0 turns '
                                     'stochastic depth off)', '0.1'),
    'embed_dims': (_one_or_sequence_of(_positive_int), 'a positive int or one per stage', '96'),
    'split_size': (_one_or_sequence_of(_positive_int), 'a positive int or one per stage', '(1, 2, 7, 7)'),
    'depths': (_sequence_of(_positive_int), 'a tuple of positive ints, one per stage', '(2, 2, 6, 2)'),
    'num_heads': (_sequence_of(_positive_int), 'a tuple of positive ints, one per stage', '(3, 6, 12, 24)'),
    'sr_ratios': (_sequence_of(_positive_int), 'a tuple of positive ints, one per stage (1: no reduction)',
                  '(8, 4, 2, 1)'),
    'patch_sizes': (_sequence_of(_positive_int), 'a tuple of positive ints, one per stage', '(4, 2, 2, 2)'),
    'mlp_ratios': (_sequence_of(_positive_number), 'a tuple of positive numbers, one per stage', '(8, 8, 4, 4)'),
}


def check_backbone_options(options: Mapping[str, Any], backbone: str) -> None:
    """Type and range of every setting in ``options`` that ``OPTION_KINDS`` knows; a one-line error
    naming the setting and the fix. (An arch override left at None is no setting: ``resolve_arch``
    drops it before the arch is checked.)"""
    for key, value in options.items():
        if key not in OPTION_KINDS:
            continue
        check, kind, example = OPTION_KINDS[key]
        if not check(value):
            wrong_type = isinstance(value, (bool, str)) or not isinstance(value, (numbers.Real, list, tuple))
            error = TypeError if wrong_type else ValueError
            raise error(f'{backbone}: {key}={value!r} must be {kind}, e.g. {key}={example}.')


def check_multiple_of(size: tuple[int, int], multiple: int, name: str, backbone: str, why: str) -> None:
    """Both sides of ``size`` positive multiples of ``multiple``."""
    if any(s <= 0 or s % multiple for s in size):
        raise ValueError(f'{backbone}: {name}={size} must be positive multiples of {multiple} ({why}); e.g. '
                         f'{name}={max(multiple, round(224 / multiple) * multiple)}.')
