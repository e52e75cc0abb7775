"""The authors' ImageNet classifiers as torch modules: an InLine backbone, the final norm, average
pooling and the linear head, loading the authors' checkpoints WITH their head.

Torch only: :mod:`inline_dense.timm` registers these classes with timm; they follow timm's
classifier and feature-getter contracts (``forward_features``, ``forward_head``,
``reset_classifier``, ``forward_intermediates``, ``prune_intermediate_layers``, ``feature_info``)
without importing it.

The authors' heads (each family's spec, ``head``): a final norm on the last stage (``norm``, where
the family has one), the average of its tokens (a pyramid) or its cls token (a ViT: InLine-DeiT),
then ``head`` (Linear).

A family whose backbone has prefix tokens (a ViT's cls token) follows timm's ``VisionTransformer``
contract: ``forward_features`` gives the normalised tokens (B, P + h*w, C), cls token first;
``global_pool`` 'token' (its default), 'avg' (the grid tokens' mean), 'max', 'avgmax' or ''
(the tokens unpooled).
"""
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from .. import registry, variants
from ..checkpoint import CORE, Advice, Allowed, load_file
from ..checkpoint.adapt import adapt_input_conv
from ..checkpoint.loading import check_published_family
from ..families import backbone_class
from ..layers.arch import to_2tuple_size
from ..layers.backbone import InLineBackboneBase
from ..layers.block import TransformerBlock
from ..layers.weight_init import trunc_normal_
from ..typing import HW, StateDict

# from the variant table (inline_dense.variants): variant -> (family, preset)
VARIANTS: dict[str, tuple[str, str]] = {}
registry.follow(lambda spec: VARIANTS.update({w.name: (spec.name, w.preset) for w in spec.weights}))
POOLS = ('avg', 'max', 'avgmax', '')  # global_pool's choices, timm's names
TOKEN_POOLS = ('token', *POOLS)  # a ViT's (prefix tokens): the cls token too
IGNORED_SIZE_ARGS = ('img_size', 'dynamic_img_size', 'strict_img_size', 'dynamic_img_pad')


def check_output_stride(output_stride: int | None, name: str, strides: Sequence[int]) -> None:
    """Only the backbone's own (the last of ``strides``, its outputs' strides): the InLine backbones
    downsample by strided patch embeddings / merges, with no dilation to trade."""
    if output_stride is not None and output_stride != strides[-1]:
        listed = ', '.join(str(s) for s in sorted(set(strides)))
        raise ValueError(f'{name}: output_stride={output_stride} is not supported: the InLine backbone downsamples by '
                         f'strided patch embeddings or patch merging (strides {listed}), which cannot be turned '
                         f'into dilation. Use a decoder that takes stride-{strides[-1]} features (smp: Unet, FPN, '
                         f'UPerNet, Segformer, Linknet, MAnet, UnetPlusPlus; not DeepLabV3/V3+, which need output '
                         f'stride 8 or 16).')


def training_size(img_size: int | Sequence[int], patch: int) -> tuple[int, int]:
    """timm's ``img_size`` as a ViT's ``pretrain_img_size``: (h, w) rounded up to whole patches (the
    backbone pads its input so; timm's ViT sizes its position grid from ``img_size`` the same way)."""
    h, w = to_2tuple_size(img_size, 'img_size', 'InLineClassifier')
    return -(-h // patch) * patch, -(-w // patch) * patch


def take_indices(num_stages: int, indices: int | list[int] | None) -> tuple[list[int], int]:
    """timm's index convention: None -> all stages, an int n -> the last n, a sequence -> those
    (negative from the end). Returns (sorted stage indices, the largest). Loops, for TorchScript."""
    chosen: list[int] = []
    if indices is None:
        chosen = list(range(num_stages))
    elif isinstance(indices, int):
        if not 0 < indices <= num_stages:
            raise ValueError(f'indices={indices}: take 1 to {num_stages} of the last stages.')
        chosen = list(range(num_stages - indices, num_stages))
    else:
        for i in indices:
            j = i + num_stages if i < 0 else i
            if not 0 <= j < num_stages:
                raise ValueError(f'indices={indices}: stage indices must lie in [-{num_stages}, {num_stages - 1}].')
            if j not in chosen:
                chosen.append(j)
        if len(chosen) == 0:
            raise ValueError(f'indices={indices}: give at least one stage index.')
        chosen.sort()
    return chosen, chosen[-1]


class InLineClassifier(nn.Module):
    """An InLine backbone with the authors' classification head.

    Args:
        family: a family of :data:`inline_dense.registry.FAMILIES` (default the first).
        arch: the backbone's preset name ('tiny', ...) or arch dict.
        num_classes: head outputs; 0: no head (``forward`` gives the pooled features).
        global_pool: 'avg' (the authors' for a pyramid: the token mean), 'max', 'avgmax' (the mean of
            both), or '' (no pooling: with ``num_classes=0``, ``forward`` gives the unpooled (B, C, h, w)
            map of ``forward_features``, as timm's ``global_pool=''``; with a head, per-position logits);
            for a ViT (InLine-DeiT) also 'token' (the authors': the cls token), and '' gives the
            (B, P + h*w, C) tokens. None: the family's (its spec's ``head.pool``).
        drop_rate: dropout before the head.
        in_chans: input channels (timm's name for the backbone's ``in_channels``).
        **backbone_kwargs: the backbone's constructor arguments (``drop_path_rate``, ``with_cp``,
            ``embed_dims``, ...); ``dynamic_img_size``, ``strict_img_size`` are accepted and ignored
            (any size works); ``img_size`` sets a ViT's position grid (InLine-DeiT's
            ``pretrain_img_size``, as timm's ViT: a checkpoint's grid is resampled to it on load) and is
            ignored by the pyramids; ``output_stride`` must be 32 or None.

    Shapes: ``forward_features`` (B, 3, H, W) -> (B, C, ceil(H/32), ceil(W/32)) after the final
    norm (a ViT: the tokens (B, 1 + ceil(H/16) * ceil(W/16), C)); ``forward_head`` -> (B, num_classes)
    (or (B, C) with ``pre_logits``).
    """

    def __init__(self, family: str = registry.EXAMPLE_FAMILY, arch: str | dict = 'tiny', num_classes: int = 1000,
                 global_pool: str | None = None, drop_rate: float = 0.0, in_chans: int = 3,
                 output_stride: int | None = None, **backbone_kwargs) -> None:
        super().__init__()
        spec = registry.family(family)
        check_output_stride(output_stride, f'InLine-{family}',
                            [o.stride for o in spec.preset_outputs(arch if isinstance(arch, str) else dict(arch))])
        img_size = backbone_kwargs.get('img_size')
        for key in IGNORED_SIZE_ARGS:  # timm passes these to every model; InLine takes any input size
            backbone_kwargs.pop(key, None)
        if img_size is not None and backbone_kwargs.get('pretrain_img_size') is None and any(
                'pretrain_img_size' in preset for preset in spec.presets.values()):
            backbone_kwargs['pretrain_img_size'] = training_size(img_size, backbone_kwargs.get('patch_size', 16))
        for key in ('out_norm', 'out_indices', 'init_cfg'):
            if key in backbone_kwargs:
                raise TypeError(f'InLineClassifier: {key} is fixed (all stages, no per-stage output norm, '
                                f'initialised at construction); build the backbone class itself for other choices.')
        self.family = family
        backbone: Callable[..., InLineBackboneBase] = backbone_class(spec)  # each family has its own arguments
        self.backbone = backbone(arch=arch, in_channels=in_chans, out_norm=False, **backbone_kwargs)
        self.backbone.out_indices = list(range(len(self.backbone.strides)))  # every output (no output norms)
        dims = self.backbone.embed_dims
        self.num_features = self.head_hidden_size = dims[-1]
        self.num_classes = num_classes
        self.in_chans = in_chans
        # tokens before the grid's (a ViT's cls token): forward_features gives tokens, timm's ViT contract
        self.num_prefix_tokens = self.backbone.num_prefix_tokens
        self.norm = nn.LayerNorm(dims[-1], eps=self.backbone.out_norm_eps) if spec.head.final_norm else nn.Identity()
        self.global_pool = self._check_pool(spec.head.pool if global_pool is None else global_pool)
        self.head_drop = nn.Dropout(drop_rate)
        self.head = nn.Linear(dims[-1], num_classes) if num_classes > 0 else nn.Identity()
        # the taps are called on each stage's output map: timm's hook features read them
        self.feature_info = [dict(info, module=f'backbone.{info["module"]}') for info in self.backbone.output_info()]
        self._init_head()

    def _check_pool(self, global_pool: str) -> str:
        if self.num_prefix_tokens > 0:
            if global_pool not in TOKEN_POOLS:
                raise ValueError(f"global_pool={global_pool!r}: use one of {list(TOKEN_POOLS)} ('token' is the "
                                 f"authors' cls token; 'avg' the mean of the other tokens; '' keeps the tokens).")
            return global_pool
        if global_pool not in POOLS:
            hint = ' (the cls token: this backbone has none)' if global_pool == 'token' else ''
            raise ValueError(f"global_pool={global_pool!r}{hint}: use one of {list(POOLS)} ('avg' is the authors' "
                             f"token mean; '' keeps the unpooled map).")
        return global_pool

    def _init_head(self) -> None:
        for m in (self.norm, self.head):
            if isinstance(m, nn.Linear):
                trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    # ------------------------------------------------------------------ timm's classifier contract
    def get_classifier(self) -> nn.Module:
        return self.head

    def reset_classifier(self, num_classes: int, global_pool: str | None = None) -> None:
        """A new head with ``num_classes`` outputs (0: none, ``forward`` gives pooled features)."""
        if global_pool is not None:
            self.global_pool = self._check_pool(global_pool)
        self.num_classes = num_classes
        ref = next(self.parameters())
        self.head = nn.Linear(self.num_features, num_classes, device=ref.device, dtype=ref.dtype) \
            if num_classes > 0 else nn.Identity()
        if num_classes > 0 and ref.device.type != 'meta':
            self._init_head()

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Recompute every block in backward (the backbone's ``with_cp``)."""
        for m in self.backbone.modules():
            if isinstance(m, TransformerBlock):
                m.with_cp = enable

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C_in, H, W) -> last stage after the final norm, (B, C, ceil(H/32), ceil(W/32)); a ViT's
        tokens (B, P + h*w, C), its P prefix tokens first."""
        if self.num_prefix_tokens > 0:
            maps, prefixes = self.backbone.forward_with_prefix(x)
            return self.norm(self._tokens(maps[-1], prefixes[-1]))
        return self._final_norm(self.backbone(x)[-1])

    @staticmethod
    def _tokens(grid: torch.Tensor, prefix: torch.Tensor) -> torch.Tensor:
        """A ViT's output map (B, C, h, w) and its prefix tokens (B, P, C) -> the tokens (B, P + h*w, C)."""
        return torch.cat([prefix, grid.flatten(2).transpose(1, 2)], 1)

    def forward_head(self, x: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """(B, C, h, w) from ``forward_features`` -> (B, num_classes), or the pooled (B, C).
        With ``global_pool=''``: (B, C, h, w) unpooled, or per-position logits (B, num_classes, h, w).
        A ViT's tokens (B, P + h*w, C) -> (B, num_classes) (or the pooled (B, C)); with
        ``global_pool=''`` the tokens, or per-token logits (B, P + h*w, num_classes)."""
        if self.num_prefix_tokens > 0:
            return self._token_head(x, pre_logits)
        if self.global_pool == '':
            x = self.head_drop(x)
            return x if pre_logits else self.head(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        if self.global_pool == 'avg':
            x = x.mean(dim=(2, 3))
        elif self.global_pool == 'max':
            x = x.amax(dim=(2, 3))
        else:  # 'avgmax'
            x = 0.5 * (x.mean(dim=(2, 3)) + x.amax(dim=(2, 3)))
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def _token_head(self, x: torch.Tensor, pre_logits: bool) -> torch.Tensor:
        """timm's ViT pooling over tokens (B, P + h*w, C): the cls token, or the grid tokens' mean / max."""
        p = self.num_prefix_tokens
        if self.global_pool == 'token':
            x = x[:, 0]
        elif self.global_pool == 'avg':
            x = x[:, p:].mean(1)
        elif self.global_pool == 'max':
            x = x[:, p:].amax(1)
        elif self.global_pool == 'avgmax':
            x = 0.5 * (x[:, p:].mean(1) + x[:, p:].amax(1))
        x = self.head_drop(x)
        return x if pre_logits else self.head(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(x))

    def _final_norm(self, x: torch.Tensor) -> torch.Tensor:
        """The final norm on an NCHW map (a LayerNorm over channels; PVT's and a pruned model's is
        an Identity)."""
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    # ------------------------------------------------------------------ timm's optimizer contract
    @torch.jit.ignore
    def no_weight_decay(self) -> set[str]:
        """Parameters timm's optimizer factory must not decay beyond its own rule (every 1-D
        parameter, i.e. norms and biases): the family's (its spec's ``head.no_weight_decay``), e.g.
        Swin's relative-position bias tables, PVT's position embeddings."""
        endings = registry.FAMILIES[self.family].head.no_weight_decay
        return {n for n, _ in self.named_parameters() if endings and n.endswith(endings)}

    @torch.jit.ignore
    def group_matcher(self, coarse: bool = False) -> dict[str, Any]:
        """timm's parameter groups (layer-wise LR decay), the family's (its spec's ``head.groups``):
        for a pyramid the stem, then per stage its entry (PVT's patch / position embedding, CSwin's
        merge) and blocks, Swin's merge at its stage's end, the final norm last."""
        groups = registry.FAMILIES[self.family].head.groups
        return dict(stem=groups.stem, blocks=groups.coarse if coarse else list(groups.fine))

    # ------------------------------------------------------------------ timm's feature-getter contract
    def forward_intermediates(self, x: torch.Tensor, indices: int | list[int] | None = None,
                              norm: bool = False, stop_early: bool = False, output_fmt: str = 'NCHW',  # noqa: ARG002
                              intermediates_only: bool = False, valid_hw: list[HW] | None = None,
                              return_prefix_tokens: bool = False) -> Any:
        """Stage outputs (B, C_i, ceil(H/s_i), ceil(W/s_i)), s_i = 4, 8, 16, 32, for ``indices``;
        with ``norm`` the final norm is applied to the last stage's map. Unless
        ``intermediates_only``, also returns the final features (as ``forward_features``):
        ``(final, intermediates)``.
        A ViT (InLine-DeiT): every block's grid (B, C, ceil(H/16), ceil(W/16)), ``norm`` on each
        (timm's ``VisionTransformer``), the final features its tokens.

        ``output_fmt`` 'NHWC' gives the maps as (B, h, w, C) views, 'NLC' as (B, h*w, C) tokens (timm's
        ViT: the grid's tokens, without the prefix tokens).
        ``return_prefix_tokens`` (timm's ViT): a ViT's intermediates become (map, prefix tokens
        (B, P, C)) pairs, the prefix tokens normed with ``norm``; a pyramid has none and ignores it.
        ``valid_hw``: each image's real size in a padded batch (see the backbone's ``forward``).
        ``stop_early`` is accepted; the stages after the last index are removed by
        ``prune_intermediate_layers`` instead. (TorchScript compiles :meth:`intermediate_maps`, which
        timm's feature getter calls.)
        """
        final, intermediates, prefixes = self.intermediate_maps(x, indices, norm, output_fmt, valid_hw)
        taken: list[Any] = list(intermediates)
        if return_prefix_tokens and self.num_prefix_tokens > 0:
            taken = list(zip(intermediates, prefixes))
        return taken if intermediates_only else (final, taken)

    def intermediate_maps(self, x: torch.Tensor, indices: int | list[int] | None = None, norm: bool = False,
                          output_fmt: str = 'NCHW', valid_hw: list[HW] | None = None
                          ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """:meth:`forward_intermediates`'s work with one return type (TorchScript's): the final
        features, the chosen intermediates, and their prefix tokens (B, P, C) (P = 0 for a pyramid)."""
        if output_fmt != 'NCHW' and output_fmt != 'NHWC' and output_fmt != 'NLC':
            raise ValueError(f"output_fmt='{output_fmt}': InLine stages give 'NCHW' (B, C, H, W), 'NHWC' "
                             f"(B, H, W, C) or 'NLC' (B, H*W, C) maps.")
        stages, prefixes = self.backbone.forward_with_prefix(x, valid_hw)
        chosen, _ = take_indices(len(stages), indices)
        last = len(stages) - 1
        vit = self.num_prefix_tokens > 0  # every block as wide as the last: the final norm fits each (timm's ViT)
        intermediates: list[torch.Tensor] = []
        tokens: list[torch.Tensor] = []
        for i in chosen:
            t = self._final_norm(stages[i]) if norm and (vit or i == last) else stages[i]
            if output_fmt == 'NHWC':
                t = t.permute(0, 2, 3, 1)
            elif output_fmt == 'NLC':
                t = t.flatten(2).transpose(1, 2)
            intermediates.append(t)
            tokens.append(self.norm(prefixes[i]) if norm and vit else prefixes[i])
        final = self.norm(self._tokens(stages[-1], prefixes[-1])) if vit else self._final_norm(stages[-1])
        return final, intermediates, tokens

    @torch.jit.ignore
    def prune_intermediate_layers(self, indices: int | Sequence[int] = 1, prune_norm: bool = False,
                                  prune_head: bool = True) -> list[int]:
        """Removes the stages after the last of ``indices`` (and the final norm / head if asked);
        returns the stage indices kept for ``forward_intermediates``. As timm's models: without its
        head (``prune_head``, or a pyramid's stages removed: the head was sized for the last one) the
        model has no classifier and no pooling, so ``forward`` gives the unpooled map of the last kept
        stage (a plain ViT: its tokens, and its head is kept unless ``prune_head``, as timm's ViT)."""
        backbone = self.backbone
        chosen, last = take_indices(len(backbone.stages), indices if isinstance(indices, int) else list(indices))
        # A pyramid's head and final norm were sized for its last stage; a plain ViT's fit every block
        resized = backbone.embed_dims[last] != backbone.embed_dims[-1]
        removed = last + 1 < len(backbone.stages)
        if removed:
            backbone.stages = backbone.stages[:last + 1]
            backbone.taps = backbone.taps[:last + 1]
            backbone.strides = backbone.strides[:last + 1]
            backbone.out_indices = list(range(last + 1))
            if getattr(backbone.stages[last], 'downsample', None) is not None:  # Swin: merging into a removed stage
                backbone.stages[last].downsample = None  # type: ignore[assignment]
            self.feature_info = self.feature_info[:last + 1]
            self.num_features = self.head_hidden_size = backbone.embed_dims[last]
        if prune_norm or resized:
            self.norm = nn.Identity()
        if prune_head or resized:
            self.reset_classifier(0, '')
        return chosen

    # ------------------------------------------------------------------ weights
    def convert_pretrained(self, state_dict: StateDict) -> StateDict:
        """The authors' classification layout (or ours) -> this module's keys; InLine-DeiT's position grid
        resampled to the model's when the checkpoint's differs (the backbone's ``adapt_pretrained``)."""
        adapt: Callable[..., StateDict] = getattr(self.backbone, 'adapt_pretrained', lambda state, prefix: state)  # noqa: ARG005
        if any(k.startswith('backbone.') for k in state_dict):  # our own layout (e.g. a timm checkpoint)
            return adapt(dict(state_dict), prefix='backbone.')
        head = {k: v for k, v in state_dict.items() if k.startswith('head.')}
        converted = adapt(self.backbone.convert_pretrained(state_dict)[0], prefix='')
        last = len(self.backbone.depths) - 1
        out = {}
        for key, value in converted.items():
            new = re.sub(rf'^out_norms\.{last}\.', 'norm.', key)
            out[new if new.startswith('norm.') else f'backbone.{key}'] = value
        out.update(head)
        return out

    def load_pretrained(self, checkpoint: str | Mapping[str, torch.Tensor], weights: str = 'auto',
                        advice: Advice | None = None) -> list[str]:
        """Loads the authors' checkpoint (a path, URL or ``inline://`` name; EMA weights when the file
        has them, unless ``weights`` says 'model') strictly through the one loader
        (:func:`inline_dense.checkpoint.load_file`). Its head only if it fits ``num_classes``: a head of
        another size is dropped with a log line naming it, and the model's stays freshly initialised;
        a 3-channel first convolution is adapted to ``in_chans`` (summed for 1, repeated and scaled
        otherwise, as timm's ``adapt_input_conv``). ``checkpoint`` may be a state dict (timm's
        ``pretrained_cfg['state_dict']``). ``advice``: the caller's terms for the errors (timm's, smp's;
        default the torch API's).
        Returns the checkpoint keys not loaded."""
        check_published_family(checkpoint, self.family, f'this {type(self).__name__}')
        first_conv = registry.FAMILIES[self.family].head.first_conv + '.weight'

        def convert(state: StateDict) -> tuple[StateDict, list[str]]:
            state = self.convert_pretrained(state)
            if first_conv in state:
                state[first_conv] = adapt_input_conv(state[first_conv], self.in_chans, first_conv)
            return state, []

        optional = ('head.', 'norm.')  # no head (num_classes=0), the final norm pruned (features_only)
        return load_file(self, checkpoint, convert=convert, within=None, weights=weights,
                         allowed=Allowed(missing=('head.',), unused=optional, resized=('head.',)),
                         advice=advice or CORE,
                         why=f'model, InLine-{self.family} {self.backbone.arch} (is it another variant?)',
                         example=variants.example_of(self.family)).dropped


def variant_kwargs(variant: str) -> dict[str, str]:
    """A published variant's ``{'family': ..., 'arch': ...}`` (from :mod:`inline_dense.variants`)."""
    entry = variants.variant(variant)
    return dict(family=entry.family, arch=entry.arch)


def build_classifier(variant: str, num_classes: int = 1000, checkpoint: str | None = None,
                     **kwargs) -> InLineClassifier:
    """The authors' ImageNet model ``variant`` (a name of :data:`inline_dense.variants.VARIANTS`),
    loaded from ``checkpoint`` (a path, URL or ``inline://`` name) when given."""
    entry = variants.variant(variant)
    model = InLineClassifier(family=entry.family, arch=entry.arch, num_classes=num_classes, **kwargs)
    if checkpoint is not None:
        model.load_pretrained(checkpoint)
    return model
