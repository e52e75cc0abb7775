"""Command-line inputs of tools/train.py and tools/test.py checked before anything is built: the
work directory, and ``--cfg-options`` values of the wrong type or for settings that do not exist.

mmengine's ``DictAction`` keeps a value it cannot read as a number or a boolean as text, so
``optim_wrapper.optimizer.lr=abc`` reaches the optimizer (``TypeError`` deep inside torch) and
``optimizer.lr=1e-4`` on a config that names it ``optim_wrapper.optimizer.lr`` adds an unused
``optimizer`` section silently.
"""
import os.path as osp
from collections.abc import Iterator, Mapping
from typing import Any


class ToolInputError(ValueError):
    """A command-line value a tool cannot use; the message names it and what to pass instead."""


def check_work_dir(work_dir: str) -> None:
    """Raises :class:`ToolInputError` when ``work_dir`` or a directory above it is a file."""
    path = osp.abspath(work_dir)
    while path and not osp.exists(path):
        parent = osp.dirname(path)
        if parent == path:
            return
        path = parent
    if not osp.isdir(path):
        what = 'is a file' if osp.abspath(work_dir) == path else f'is inside {path}, which is a file'
        raise ToolInputError(f'the work directory {work_dir} {what}; the logs and checkpoints need a directory: '
                             f'pass another --work-dir (a missing one is created).')


def _get(cfg: Any, key: str) -> tuple[bool, Any]:
    """(found, value) of a dotted ``key`` (list items by index, as ``--cfg-options`` takes them)."""
    node = cfg
    for part in key.split('.'):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, (list, tuple)) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False, None
    return True, node


def _keys(node: Any, prefix: str = '') -> Iterator[str]:
    if isinstance(node, Mapping):
        for k, v in node.items():
            key = f'{prefix}{k}'
            yield key
            yield from _keys(v, key + '.')


def _kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return 'boolean (true / false)'
    if isinstance(value, (int, float)):
        return 'number'
    return None


def check_cfg_options(cfg: Any, options: Mapping[str, Any] | None) -> None:
    """Raises :class:`ToolInputError` for a ``--cfg-options`` value given as text where the config
    has a number or a boolean, and for a new top-level section whose keys the config has under
    another path (``optimizer.lr`` where it has ``optim_wrapper.optimizer.lr``)."""
    if not options:
        return
    plain = cfg.to_dict() if callable(getattr(cfg, 'to_dict', None)) else cfg
    problems: list[str] = []
    for key, value in options.items():
        found, old = _get(plain, key)
        if not found:
            if key.split('.')[0] not in plain and '.' in key:
                near = sorted(k for k in _keys(plain) if k.endswith('.' + key))
                if near:
                    problems.append(f'{key}={value!r}: the config has no {key.split(".")[0]!r} section; did you '
                                    f'mean {" or ".join(near[:3])}?')
            continue
        kind = _kind(old)
        if kind is not None and isinstance(value, str):
            problems.append(f'{key}={value!r}: {key} takes a {kind} (the config has {old!r}), not the text '
                            f'{value!r}')
    if problems:
        text = '; '.join(problems)
        raise ToolInputError(f'--cfg-options: {text}' + ('' if text.endswith('?') else '.'))


__all__ = ['ToolInputError', 'check_cfg_options', 'check_work_dir']
