"""Pretrained weights for a model with another number of input channels.

An ImageNet checkpoint's first convolution takes 3 channels (RGB). For ``in_chans`` = 1 its
kernels are summed over the colour channels (a grey image through RGB filters); for ``in_chans``
= C > 3 the RGB kernels are repeated over the C channels and scaled by 3 / C, so that an input with
the same value in every channel gives the same response. This is the rule timm's
``adapt_input_conv`` applies, so a timm user gets what timm's own models give.
"""
import logging
import math

import torch

from .errors import CheckpointError

log = logging.getLogger(__name__)

PRETRAINED_CHANNELS = 3


def adapt_input_conv(weight: torch.Tensor, in_chans: int, key: str = 'first conv') -> torch.Tensor:
    """``weight`` (O, 3, kh, kw) -> (O, in_chans, kh, kw); unchanged when it already has
    ``in_chans`` input channels. Raises CheckpointError for another input width than 3."""
    if weight.ndim != 4 or weight.shape[1] == in_chans:
        return weight
    if weight.shape[1] != PRETRAINED_CHANNELS:
        raise CheckpointError(f'{key}: the checkpoint\'s first convolution takes {weight.shape[1]} input channels, '
                              f'the model {in_chans}; only 3-channel (RGB) weights can be adapted to another '
                              f'number of channels.')
    dtype = weight.dtype
    w = weight.float()
    if in_chans == 1:
        out = w.sum(dim=1, keepdim=True)
    else:
        repeats = math.ceil(in_chans / PRETRAINED_CHANNELS)
        out = w.repeat(1, repeats, 1, 1)[:, :in_chans] * (PRETRAINED_CHANNELS / in_chans)
    log.info(f'{key}: pretrained RGB kernels adapted to {in_chans} input channel(s) '
             f'({"summed" if in_chans == 1 else f"repeated, scaled by 3/{in_chans}"})')
    return out.to(dtype)
