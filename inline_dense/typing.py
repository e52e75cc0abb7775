"""Type aliases shared across the package."""

import torch

HW = tuple[int, int]
"""A (height, width) pair: an image size in pixels or a token grid size."""

StateDict = dict[str, torch.Tensor]
"""Parameter and buffer tensors by name, as ``nn.Module.state_dict()`` returns them."""
