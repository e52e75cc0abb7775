"""Type aliases shared across the package."""
from typing import Dict, Tuple

import torch

HW = Tuple[int, int]
"""A (height, width) pair: an image size in pixels or a token grid size."""

StateDict = Dict[str, torch.Tensor]
"""Parameter and buffer tensors by name, as ``nn.Module.state_dict()`` returns them."""
