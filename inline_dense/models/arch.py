"""Parsing and validation of the architecture settings shared by both backbones."""
from typing import Dict, List, Sequence, Tuple

ATTN_LETTERS = {'I': 'InLine attention', 'S': 'softmax attention', 'M': 'InLine then softmax (Swin only)'}


def resolve_arch(name_or_dict, presets: Dict[str, dict], backbone: str) -> dict:
    """A preset name (e.g. 'tiny') or a full dict -> a copy of the settings."""
    if isinstance(name_or_dict, dict):
        missing = [k for k in next(iter(presets.values())) if k not in name_or_dict]
        if missing:
            raise ValueError(f'{backbone}: a custom arch dict needs the keys {missing}.')
        return dict(name_or_dict)
    if name_or_dict not in presets:
        raise ValueError(f'{backbone}: unknown arch {name_or_dict!r}; use one of {sorted(presets)} '
                         f'or pass a dict with the keys {sorted(next(iter(presets.values())))}.')
    return dict(presets[name_or_dict])


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
        raise ValueError(f'{backbone}: attn_type {attn_type!r} has trailing {digits!r} but no M stage; it needs {hint}.')
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


def check_stage_lists(cfg: Dict[str, Sequence], num_stages: int, backbone: str) -> None:
    for key, value in cfg.items():
        if len(value) != num_stages:
            raise ValueError(f'{backbone}: {key}={list(value)} has {len(value)} entries; '
                             f'it needs one per stage ({num_stages}).')
