"""The from-scratch initialisers of the backbones, in plain torch.

``trunc_normal_`` is written here, not taken from ``torch.nn.init``: since torch 2.10 or so torch's
draws by rejection sampling, a different random stream from the inverse-CDF method that timm,
mmengine and the authors' code use (and that this package used through mmengine before the core
was split from it). The same seed must give the same weights, and the same toy-demo figures.
"""
import math

import torch
from torch import nn


@torch.no_grad()
def trunc_normal_(tensor: torch.Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0) -> torch.Tensor:
    """Fills ``tensor`` (any shape) in place from N(mean, std^2) truncated to [a, b]: uniform
    draws between the CDF values of a and b, mapped through the inverse normal CDF (``erfinv``)."""
    def normal_cdf(x: float) -> float:
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    low, high = normal_cdf((a - mean) / std), normal_cdf((b - mean) / std)
    tensor.uniform_(2 * low - 1, 2 * high - 1)
    tensor.erfinv_()
    tensor.mul_(std * math.sqrt(2.0)).add_(mean)
    return tensor.clamp_(min=a, max=b)


def zero_bias(module: nn.Module) -> None:
    bias = getattr(module, 'bias', None)
    if isinstance(bias, torch.Tensor):
        nn.init.constant_(bias, 0.0)


@torch.no_grad()
def init_transformer_weights(model: nn.Module) -> None:
    """Truncated-normal Linear (std 0.02 within +-2), unit LayerNorm, fan-out normal Conv2d,
    zero biases, module by module in ``model.modules()`` order, as the authors do."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            trunc_normal_(m.weight, std=0.02)
            zero_bias(m)
        elif isinstance(m, nn.LayerNorm):
            if m.weight is not None:
                nn.init.constant_(m.weight, 1.0)
            zero_bias(m)
        elif isinstance(m, nn.Conv2d):
            fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
            nn.init.normal_(m.weight, 0.0, math.sqrt(2.0 / fan_out))
            zero_bias(m)
