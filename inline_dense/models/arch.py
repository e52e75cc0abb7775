"""Parsing and validation of the architecture settings every backbone shares."""
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union


def resolve_arch(arch: Union[str, Mapping[str, Any]], presets: Mapping[str, dict], backbone: str,
                 overrides: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
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
                    allow_mixed: bool) -> List[List[str]]:
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


def check_out_indices(out_indices: Sequence[int], num_stages: int, backbone: str) -> Tuple[int, ...]:
    idx = tuple(int(i) for i in out_indices)
    bad = [i for i in idx if not 0 <= i < num_stages]
    if not idx or bad:
        raise ValueError(f'{backbone}: out_indices {tuple(out_indices)} must be a non-empty subset of '
                         f'{tuple(range(num_stages))}.')
    return idx


def check_stage_lists(cfg: Mapping[str, Sequence], num_stages: int, backbone: str) -> None:
    for key, value in cfg.items():
        if len(value) != num_stages:
            raise ValueError(f'{backbone}: {key}={list(value)} has {len(value)} entries; '
                             f'it needs one per stage ({num_stages}).')


def to_2tuple_size(value: Union[int, Sequence[int]], name: str, backbone: str) -> Tuple[int, int]:
    """An int or a 1- or 2-sequence of ints -> (h, w), as mmdet's PVT and mmseg's Swin accept.

    Not timm's ``to_2tuple``, which passes any iterable through unchecked: a wrong value here
    gets an error naming the setting."""
    if isinstance(value, int):
        return value, value
    if isinstance(value, Sequence) and len(value) in (1, 2) and all(isinstance(v, int) for v in value):
        return (value[0], value[0]) if len(value) == 1 else (value[0], value[1])
    raise TypeError(f'{backbone}: {name} must be an int or a tuple of 1 or 2 ints, got {value!r}.')
