"""What InLine-Swin and InLine-PVT share: input checks, frozen stages,
output norms, the padding mask and pretrained loading through ``init_cfg``."""
import math
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from mmengine.model import BaseModule
from torch import nn

HW = Tuple[int, int]


class InLineBackboneBase(BaseModule):
    """Base class. Subclasses build ``self.stages`` and implement ``_forward_stages``,
    ``_init_from_scratch``, ``_frozen_modules`` and ``convert_pretrained``."""

    name = 'InLineBackbone'
    min_input_size = 32  # total stride: smaller inputs leave the last stage all padding

    def __init__(self, in_channels: int, out_indices: Sequence[int], out_norm: bool,
                 stage_dims: Sequence[int], frozen_stages: int, init_cfg: Optional[dict]) -> None:
        super().__init__(init_cfg=init_cfg)
        num_stages = len(stage_dims)
        if not -1 <= frozen_stages <= num_stages:
            raise ValueError(f'{self.name}: frozen_stages={frozen_stages} must be in [-1, {num_stages}].')
        if init_cfg is not None and init_cfg.get('type') == 'Pretrained' and not init_cfg.get('checkpoint'):
            raise ValueError(f"{self.name}: init_cfg=dict(type='Pretrained') needs checkpoint=PATH.")
        self.in_channels = in_channels
        self.frozen_stages = frozen_stages
        self.out_norm = out_norm
        self.out_norms = nn.ModuleDict(
            {str(i): nn.LayerNorm(stage_dims[i]) for i in out_indices} if out_norm else {})

    # ------------------------------------------------------------------ forward
    def check_input(self, x: torch.Tensor, valid_hw: Optional[Sequence[HW]] = None) -> None:
        if x.ndim != 4 or x.shape[1] != self.in_channels:
            raise ValueError(f'{self.name}: expected an input of shape (B, {self.in_channels}, H, W), '
                             f'got {tuple(x.shape)}. Pass a batch of {self.in_channels}-channel images, '
                             f'or set in_channels to match.')
        h, w = x.shape[-2:]
        if min(h, w) < self.min_input_size:
            raise ValueError(f'{self.name}: input {h}x{w} is smaller than {self.min_input_size}x'
                             f'{self.min_input_size}, the total stride of the backbone; resize or pad '
                             f'the image to at least {self.min_input_size} pixels per side.')
        if valid_hw is not None:
            sizes = [tuple(s) for s in valid_hw]
            if len(sizes) != x.shape[0] or any(len(s) != 2 or not 0 < s[0] <= h or not 0 < s[1] <= w
                                              for s in sizes):
                raise ValueError(f'{self.name}: valid_hw={sizes} must hold one (height, width) per image '
                                 f'({x.shape[0]}), each between 1 and the input size {h}x{w}: the real size '
                                 f'of each image before padding, e.g. img_shape of its data sample.')

    def output(self, index: int, tokens: torch.Tensor, hw: HW) -> torch.Tensor:
        """Stage output (B, N, C) tokens -> (B, C, H, W), through the stage's output norm."""
        if str(index) in self.out_norms:
            tokens = self.out_norms[str(index)](tokens)
        b, _, c = tokens.shape
        return tokens.transpose(1, 2).reshape(b, c, *hw).contiguous()

    # ------------------------------------------------------------------ freezing
    def _frozen_modules(self) -> List[nn.Module]:
        raise NotImplementedError

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
    def _init_from_scratch(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.LayerNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Conv2d):
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
                nn.init.normal_(m.weight, 0, math.sqrt(2.0 / fan_out))
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    def init_weights(self) -> None:
        cfg = self.init_cfg
        if isinstance(cfg, dict) and cfg.get('type') == 'Pretrained':
            from ..checkpoint.loading import load_pretrained
            self._init_from_scratch()  # for the parts a classification checkpoint lacks (output norms)
            load_pretrained(self, cfg['checkpoint'])
            self._is_init = True
        elif cfg is None:
            self._init_from_scratch()
            self._is_init = True
        else:
            super().init_weights()

    @staticmethod
    def convert_pretrained(state_dict: Dict[str, torch.Tensor]) -> Tuple[Dict[str, torch.Tensor], List[str]]:
        """Authors' (or our own) layout -> this backbone's keys, plus the keys dropped."""
        raise NotImplementedError


def valid_grid_sizes(valid_hw: Optional[Sequence[HW]], batch_hw: HW, stride: int) -> Optional[List[HW]]:
    """Per image, its token grid (rows, cols) at ``stride``; None when no image is padded."""
    if valid_hw is None:
        return None
    h, w = batch_hw
    sizes = [(min(math.ceil(vh / stride), h), min(math.ceil(vw / stride), w)) for vh, vw in valid_hw]
    if all(sh >= h and sw >= w for sh, sw in sizes):
        return None
    return sizes


def valid_token_mask(valid_hw: Optional[Sequence[HW]], batch_hw: HW, stride: int,
                     device: torch.device) -> Optional[torch.Tensor]:
    """(B, h*w) bool of tokens that overlap each image's real (unpadded) pixels, or None.

    ``valid_hw`` holds each image's real size in input pixels; ``batch_hw`` is the token
    grid at ``stride``. None when no image is padded beyond what its own size needs.
    """
    sizes = valid_grid_sizes(valid_hw, batch_hw, stride)
    if sizes is None:
        return None
    h, w = batch_hw
    rows = torch.arange(h, device=device).view(1, h, 1)
    cols = torch.arange(w, device=device).view(1, 1, w)
    limits = torch.tensor(sizes, device=device)
    mask = (rows < limits[:, 0].view(-1, 1, 1)) & (cols < limits[:, 1].view(-1, 1, 1))
    return mask.view(len(sizes), h * w)


def zero_padding(tokens: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """(B, N, C) tokens with the padded ones (``mask`` False) set to 0, as an unpadded image's
    zero padding would be; unchanged when ``mask`` is None. Used before every downsampling,
    whose 2x2 windows reach past an image's border."""
    return tokens if mask is None else tokens * mask.unsqueeze(-1).to(tokens.dtype)
