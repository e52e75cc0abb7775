"""The settings every InLine backbone shares, checked and resolved before anything is built.

A family's ``__init__`` goes one way: :func:`resolve_settings` (this module) checks its arguments
and returns a :class:`BackboneSettings`; the family makes its stem and stages (their blocks with
``layers.inline_attention`` and ``layers.transformer_block``); then ``InLineBackboneBase.__init__``
takes the settings and the built modules and finishes (output norms, freezing, initialisation).
"""
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .arch import check_backbone_options, check_out_indices, check_stage_lists, parse_attn_type, resolve_arch
from .inline_attention import IMPLS, KERNELS
from .tensor_utils import check_heads


@dataclass(frozen=True)
class BackboneSettings:
    """A backbone's shared settings, resolved and checked.

    ``name``: the family's class name (errors say it); ``arch``: the preset with the user's overrides,
    per-stage lists as tuples; ``embed_dims``, ``num_heads``, ``depths``: one per stage;
    ``attn_kinds[i][j]``: 'I' (InLine) or 'S' (the family's softmax attention) for block j of stage i;
    ``block_drop_path[i][j]``: its stochastic-depth rate; the rest as the family's arguments.
    """

    name: str
    arch: dict[str, Any]
    embed_dims: tuple[int, ...]
    depths: tuple[int, ...]
    num_heads: tuple[int, ...]
    attn_kinds: list[list[str]]
    block_drop_path: list[list[float]]
    in_channels: int
    kernel: str
    attn_impl: str
    out_indices: tuple[int, ...]
    out_norm: bool
    frozen_stages: int

    @property
    def num_stages(self) -> int:
        return len(self.depths)


def resolve_settings(name: str, presets: Mapping[str, Mapping[str, Any]], arch: str | Mapping[str, Any],
                     arch_overrides: Mapping[str, Any], *, in_channels: int, kernel: str, attn_impl: str,
                     out_indices: Sequence[int], out_norm: bool, frozen_stages: int, drop_path_rate: float,
                     options: Mapping[str, Any] | None = None, stage_lists: Mapping[str, Sequence] | None = None,
                     allow_mixed: bool = False) -> BackboneSettings:
    """Checks a family's arguments and resolves its arch; a one-line error naming the setting otherwise.

    Args:
        name: the family's class name.
        presets: its ``arch_zoo``.
        arch: a preset name or a dict with all of a preset's keys.
        arch_overrides: per-key overrides of the arch (None values are ignored).
        in_channels, kernel, attn_impl, out_indices, out_norm, frozen_stages, drop_path_rate: the
            shared arguments (see ``InLineBackboneBase``).
        options: the family's own arguments, type- and range-checked by ``arch.OPTION_KINDS``.
        stage_lists: more per-stage settings to check for one entry per stage.
        allow_mixed: whether ``attn_type`` may hold an ``M`` stage.
    """
    check_backbone_options(dict(in_channels=in_channels, out_norm=out_norm, frozen_stages=frozen_stages,
                                drop_path_rate=drop_path_rate, **(options or {})), name)
    cfg = resolve_arch(arch, presets, name, arch_overrides)
    check_backbone_options(cfg, name)
    depths, num_heads = tuple(cfg['depths']), tuple(cfg['num_heads'])
    n = len(depths)
    embed = cfg['embed_dims']
    dims = tuple(embed * 2 ** i for i in range(n)) if isinstance(embed, int) else tuple(embed)
    lists = {k: tuple(v) for k, v in cfg.items() if isinstance(v, (list, tuple))}
    check_stage_lists(dict(lists, embed_dims=dims, num_heads=num_heads, **(stage_lists or {})), n, name)
    if kernel not in KERNELS:
        raise ValueError(f'{name}: unknown kernel {kernel!r}; use one of {sorted(KERNELS)}.')
    if attn_impl not in IMPLS:
        raise ValueError(f'{name}: unknown attn_impl {attn_impl!r}; use one of {list(IMPLS)}.')
    for i, (d, h) in enumerate(zip(dims, num_heads)):
        check_heads(d, h, f'{name} stage {i}')
    if not -1 <= frozen_stages <= n:
        raise ValueError(f'{name}: frozen_stages={frozen_stages} must be in [-1, {n}].')
    rates = torch.linspace(0, drop_path_rate, sum(depths), device='cpu').tolist()  # floats, on any default device
    return BackboneSettings(
        name=name, arch={k: lists.get(k, v) for k, v in cfg.items()}, embed_dims=dims, depths=depths,
        num_heads=num_heads, attn_kinds=parse_attn_type(cfg.get('attn_type', 'I' * n), depths, name, allow_mixed),
        block_drop_path=[rates[sum(depths[:i]):sum(depths[:i + 1])] for i in range(n)], in_channels=in_channels,
        kernel=kernel, attn_impl=attn_impl, out_indices=check_out_indices(out_indices, n, name), out_norm=out_norm,
        frozen_stages=frozen_stages)
