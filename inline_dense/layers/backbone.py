"""What every InLine backbone shares: the stage loop with the padding mask, input checks, output
norms, frozen stages and the from-scratch initialisation. Plain torch: nothing of OpenMMLab or timm
is imported here (``init_cfg`` and ``init_weights()`` live in the adapter, :mod:`inline_dense.openmmlab`).

A family subclasses :class:`InLineBackboneBase` and writes only its own parts: ``arch_zoo``, an
``__init__`` that goes one way (``backbone_settings.resolve_settings`` checks its arguments; it
makes its stem and stages, its blocks by ``layers.inline_attention`` / ``transformer_block``;
then this class's ``__init__`` takes them and finishes), ``embed_input`` (the stem before stage 0; each stage module has
``enter`` and ``leave``) and ``convert_pretrained`` (the authors' checkpoint layout -> its keys).
"""
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.fx._symbolic_trace import is_fx_symbolic_tracing

from ..typing import HW, StateDict
from . import padding
from .settings import BackboneSettings
from .tensor_utils import tokens_to_map
from .tracing import fx_wrap
from .weight_init import init_transformer_weights, trunc_normal_


class InLineBackboneBase(nn.Module):
    """Base class of the InLine backbones: takes what a family built and finishes it.

    Args:
        settings: the family's resolved shared settings (:func:`backbone_settings.resolve_settings`).
        stem: the modules before stage 0 by attribute name, in construction order (Swin's
            ``patch_embed`` and ``drop_after_pos``, CSwin's ``stem``; none for PVT, whose stages
            embed). ``frozen_stages=0`` freezes them.
        stages: one module per stage, each with ``enter``, ``blocks`` and ``leave``.
        strides: each stage's stride in input pixels.
        num_prefix_tokens: tokens the stem puts before each stage's grid (a ViT's cls token): never
            padding, never part of an output map (``forward_with_prefix`` gives them).
        out_norm_eps: the output norms' LayerNorm epsilon (the authors' final norm's).

    Sets the settings as attributes (``arch``, ``embed_dims``, ``depths``, ``num_heads``,
    ``attn_kinds``, ``block_drop_path``, ``in_channels``, ``kernel``, ``attn_impl``,
    ``out_indices``, ``out_norm``, ``frozen_stages``), makes ``out_norms``, registers the stem, the
    stages and ``taps``, freezes ``frozen_stages`` and initialises the weights
    (``init_from_scratch``; load pretrained weights afterwards with
    :func:`inline_dense.checkpoint.load_pretrained`). Registration order is ``out_norms``, stem,
    stages, taps: ``modules()`` order, which the seeded initialisation walks.
    """

    arch_zoo: Mapping[str, Mapping[str, Any]] = {}  # the family spec's presets
    # Whether __init__ ends with init_from_scratch(). The OpenMMLab adapter turns it off: there
    # the runner calls init_weights() after the whole detector is built, and an initialisation at
    # construction would consume random numbers the neck and head draw today.
    init_at_construction: bool = True
    # parameters (by attribute name, in any module) drawn from a truncated normal (std 0.02) after the
    # module-by-module initialisation, in named_parameters() order: PVT's position embeddings
    trunc_normal_parameters: tuple[str, ...] = ()

    def __init__(self, settings: BackboneSettings, stem: Mapping[str, nn.Module], stages: Sequence[nn.Module],
                 strides: Sequence[int], num_prefix_tokens: int = 0, out_norm_eps: float = 1e-5) -> None:
        super().__init__()
        n = settings.num_stages
        if len(stages) != n or len(strides) != n:
            raise TypeError(f'{settings.name} must hand InLineBackboneBase {n} stages and {n} strides (one per '
                            f'stage); it gave {len(stages)} stages and the strides {tuple(strides)!r}.')
        self.arch = settings.arch
        self.embed_dims, self.depths, self.num_heads = settings.embed_dims, settings.depths, settings.num_heads
        self.attn_kinds = settings.attn_kinds
        self.block_drop_path = settings.block_drop_path
        self.in_channels = settings.in_channels
        self.kernel = settings.kernel
        self.attn_impl = settings.attn_impl
        self.out_indices: list[int] = list(settings.out_indices)
        self.frozen_stages = settings.frozen_stages
        self.out_norm = settings.out_norm
        self.num_prefix_tokens = num_prefix_tokens
        self.out_norm_eps = out_norm_eps
        self.out_norms = nn.ModuleDict({str(i): nn.LayerNorm(self.embed_dims[i], eps=out_norm_eps)
                                        for i in self.out_indices}
                                       if settings.out_norm else {})
        for attr, module in stem.items():
            setattr(self, attr, module)
        self.stem_names: tuple[str, ...] = tuple(stem)
        self.stages = nn.ModuleList(stages)
        self.strides: tuple[int, ...] = tuple(strides)
        # one Identity per stage, called on its output map: where forward hooks (timm's
        # feature_cls='hook', FeatureHookNet) read the stage outputs; no parameters, no keys
        self.taps = nn.ModuleList(nn.Identity() for _ in range(n))
        self._freeze()
        if self.init_at_construction:
            self.init_from_scratch()

    # ------------------------------------------------------------------ forward
    def output_info(self) -> list[dict[str, Any]]:
        """Each output the backbone can give (``out_indices`` picks among them), as timm describes a
        feature: ``num_chs`` channels, ``reduction`` (its stride in input pixels) and ``module``, where
        forward hooks read it (``taps.i``)."""
        return [dict(num_chs=self.embed_dims[i], reduction=self.strides[i], module=f'taps.{i}')
                for i in range(len(self.strides))]

    @property
    def min_input_size(self) -> int:
        """The total stride: smaller inputs leave the last stage all padding."""
        return self.strides[-1]

    def check_input(self, x: torch.Tensor, valid_hw: list[HW] | None = None) -> None:
        """A ValueError / TypeError a user can act on for a wrong input (see ``check_image_input``)."""
        check_image_input(x, valid_hw, self.in_channels, type(self).__name__)

    def embed_input(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[torch.Tensor, HW]:
        """The image (B, C_in, H, W) before stage 0 -> what stage 0's ``enter`` takes, and its grid:
        the stem's tokens (B, N, C) (Swin, CSwin; DeiT's with its prefix tokens first), or the image
        itself (PVT, whose stages embed)."""
        raise NotImplementedError

    def forward(self, x: torch.Tensor, valid_hw: list[HW] | None = None) -> list[torch.Tensor]:
        """(B, C_in, H, W) -> tuple of (B, C_i, ceil(H / s_i), ceil(W / s_i)) for ``out_indices``,
        s_i the stride of stage i (a list when scripted: TorchScript has no tuples of any length).

        ``valid_hw``: per image, its real (unpadded) size in pixels. The input outside it is set to 0
        (whatever the padding holds), padded tokens are zeroed before every convolution and ignored
        by the attention, so an image's features do not depend on its batch or the padding value.
        A side below the total stride is padded here, with the padding masked; an empty batch
        gives empty outputs; floating-point input is cast to the parameters' dtype (eagerly: a
        scripted model checks nothing and casts nothing).

        Each stage is ``stage.enter`` (patch embedding / merge into it), its blocks, its output
        (``taps.i``), then ``stage.leave`` (Swin's patch merging at the stage's end).
        """
        if not torch.jit.is_scripting():
            check_image_input(x, valid_hw, self.in_channels, type(self).__name__)
            if not is_fx_symbolic_tracing() and x.shape[0] == 0:  # empty outputs of the usual shapes (a tuple)
                return tuple(self.empty_outputs(x)[0])  # type: ignore[return-value]
            param = next(self.parameters(), None)
            x = x if param is None else x.to(param.dtype)  # e.g. float16 images into a float32 model
        outs, _ = self.run_stages(x, valid_hw)
        if torch.jit.is_scripting():
            return outs
        # eagerly a tuple, as OpenMMLab's necks take
        return tuple(outs)  # type: ignore[return-value]

    def forward_with_prefix(self, x: torch.Tensor, valid_hw: list[HW] | None = None
                            ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """As ``forward`` (lists), and with each output also its prefix tokens (B, ``num_prefix_tokens``, C)
        (a ViT's cls token; (B, 0, C) for a pyramid), through the same output norm: what a ViT's
        classifier head reads."""
        if not torch.jit.is_scripting():
            check_image_input(x, valid_hw, self.in_channels, type(self).__name__)
            if not is_fx_symbolic_tracing() and x.shape[0] == 0:
                return self.empty_outputs(x)
            param = next(self.parameters(), None)
            x = x if param is None else x.to(param.dtype)
        return self.run_stages(x, valid_hw)

    @torch.jit.unused
    def empty_outputs(self, x: torch.Tensor) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """An empty batch's outputs (0, C_i, ceil(H / s_i), ceil(W / s_i)) and prefix tokens (0, P, C_i)."""
        h, w = x.shape[-2], x.shape[-1]
        maps = [x.new_zeros(0, self.embed_dims[i], (h + self.strides[i] - 1) // self.strides[i],
                            (w + self.strides[i] - 1) // self.strides[i]) for i in self.out_indices]
        return maps, [x.new_zeros(0, self.num_prefix_tokens, self.embed_dims[i]) for i in self.out_indices]

    def run_stages(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[list[torch.Tensor],
                                                                                  list[torch.Tensor]]:
        """The stem and the stages on a checked input: the ``out_indices`` maps and their prefix tokens."""
        h, w = x.shape[-2], x.shape[-1]
        x, valid_hw = padding.pad_to_min_size(x, valid_hw, self.strides[-1])
        x = padding.zero_outside_valid(x, valid_hw)  # whatever the padding holds, the image meets zeros
        outs: list[torch.Tensor] = []
        prefixes: list[torch.Tensor] = []
        p = self.num_prefix_tokens
        tokens, hw = self.embed_input(x, valid_hw)
        last = len(self.strides) - 1
        for i, stage in enumerate(self.stages):
            stride = self.strides[i]
            tokens, hw = stage.enter(tokens, hw, valid_hw, stride)  # type: ignore[operator]
            mask = padding.with_prefix_tokens(padding.valid_token_mask(valid_hw, hw, stride, x.device), p)
            for block in stage.blocks:  # type: ignore[union-attr]
                tokens = block(tokens, hw, mask)
            tokens = padding.zero_padding(tokens, mask)
            if i in self.out_indices:
                normed = self.output_norm(i, tokens)
                # ceil as (h + s - 1) // s, not -(-h // s): exported to ONNX, a floor division of a
                # negative size becomes an integer Div, which truncates towards zero (one row short)
                out = self.to_map(normed, hw)[:, :, :(h + stride - 1) // stride, :(w + stride - 1) // stride]
                outs.append(self.tap(i, out))
                prefixes.append(normed[:, :p])
            if i < last:
                tokens, hw = stage.leave(tokens, hw)  # type: ignore[operator]
        return outs, prefixes

    def output_norm(self, index: int, tokens: torch.Tensor) -> torch.Tensor:
        """Stage output (B, N, C) tokens through the stage's output norm (if any)."""
        for key, norm in self.out_norms.items():  # a loop, not out_norms[str(index)]: TorchScript
            if key == str(index):
                tokens = norm(tokens)
        return tokens

    def to_map(self, tokens: torch.Tensor, hw: HW) -> torch.Tensor:
        """(B, P + H*W, C) tokens, P = ``num_prefix_tokens`` -> the grid's (B, C, H, W) map, channels-last
        (a view of the tokens: what the necks' convolutions run fastest on, and no copy)."""
        p = self.num_prefix_tokens
        if p > 0:
            tokens = tokens[:, p:]
        return tokens_to_map(tokens, hw)

    def tap(self, index: int, out: torch.Tensor) -> torch.Tensor:
        """Stage ``index``'s output map through ``taps.index`` (where forward hooks read it)."""
        for i, tap in enumerate(self.taps):  # TorchScript indexes module lists by literals only
            if i == index:
                out = tap(out)
        return out

    # ------------------------------------------------------------------ freezing
    def stem_modules(self) -> list[nn.Module]:
        """What ``frozen_stages=0`` freezes: the stem before stage 0, if any."""
        return [getattr(self, attr) for attr in self.stem_names]

    def _frozen_modules(self) -> list[nn.Module]:
        if self.frozen_stages < 0:
            return []
        mods = list(self.stem_modules())
        for i in range(self.frozen_stages):
            mods.append(self.stages[i])
            if str(i) in self.out_norms:
                mods.append(self.out_norms[str(i)])
        return mods

    def _freeze(self) -> None:
        for module in self._frozen_modules():
            module.eval()
            for p in module.parameters():
                p.requires_grad = False

    def train(self, mode: bool = True) -> 'InLineBackboneBase':
        super().train(mode)
        self._freeze()
        return self

    # ------------------------------------------------------------------ weights
    def init_from_scratch(self) -> None:
        """The authors' initialisation (``weight_init.init_transformer_weights``): the same
        random draws as mmengine's ``trunc_normal_init`` / ``constant_init`` / ``normal_init``;
        then the ``trunc_normal_parameters``."""
        init_transformer_weights(self)
        for name, param in self.named_parameters():
            if name.rsplit('.', 1)[-1] in self.trunc_normal_parameters:
                trunc_normal_(param, std=0.02)

    @staticmethod
    def convert_pretrained(state_dict: StateDict) -> tuple[StateDict, list[str]]:
        """Authors' (or our own) layout -> this backbone's keys, plus the keys dropped."""
        raise NotImplementedError


@fx_wrap
def check_image_input(x: torch.Tensor, valid_hw: list[HW] | None, in_channels: int, name: str) -> None:
    """(B, ``in_channels``, H, W) floating point, ``valid_hw`` one real size per image within H x W."""
    if x.ndim != 4 or x.shape[1] != in_channels:
        raise ValueError(f'{name}: expected an input of shape (B, {in_channels}, H, W), '
                         f'got {tuple(x.shape)}. Pass a batch of {in_channels}-channel images, '
                         f'or set in_channels to match.')
    h, w = x.shape[-2:]
    if h == 0 or w == 0:
        raise ValueError(f'{name}: got an input of {h}x{w} pixels ({tuple(x.shape)}); an image needs at least one '
                         f'pixel each way: pass images of some size (any size from 1x1 works, padded inside).')
    if not (x.is_floating_point() or x.shape[0] == 0):
        raise TypeError(f'{name}: got a {x.dtype} input; the backbone takes normalised floating-point images '
                        f'(what the data preprocessor makes of the pixels: (x - mean) / std as float).')
    if valid_hw is not None:
        sizes = [tuple(s) for s in valid_hw]
        wrong = [v for s in sizes for v in s if not _is_size(v)]
        if wrong:
            raise TypeError(f'{name}: valid_hw={sizes} must hold whole numbers of pixels (ints), got '
                            f'{wrong[0]!r} ({type(wrong[0]).__name__}): pass each image\'s real (height, width), '
                            f'e.g. img_shape of its data sample, as ints.')
        if len(sizes) != x.shape[0] or any(len(s) != 2 or not 0 < s[0] <= h or not 0 < s[1] <= w
                                          for s in sizes):
            raise ValueError(f'{name}: valid_hw={sizes} must hold one (height, width) per image '
                             f'({x.shape[0]}), each between 1 and the input size {h}x{w}: the real size '
                             f'of each image before padding, e.g. img_shape of its data sample.')


def _is_size(value: Any) -> bool:
    """A whole number of pixels: an int (not a bool; numpy's too), a traced one, or a 0-d integer tensor."""
    if isinstance(value, torch.Tensor):
        return value.ndim == 0 and not value.is_floating_point() and value.dtype != torch.bool
    return isinstance(value, (numbers.Integral, torch.SymInt)) and not isinstance(value, bool)
