"""The input checks every stand-in op shares (:mod:`inline_dense.ops.ext`): each failure is one
:class:`OpInputError` line naming the op, the argument and the fix, raised where compiled mmcv
would read out of bounds or return garbage. Imports torch only."""
import torch
from torch import Tensor


class OpInputError(ValueError):
    """A served op was given inputs it cannot compute on (wrong shape, dtype, device or range)."""


def require(ok: bool, message: str) -> None:
    """Raises :class:`OpInputError` with ``message`` unless ``ok``."""
    if not ok:
        raise OpInputError(message)


def check_float(op: str, name: str, t: Tensor) -> None:
    require(t.is_floating_point(), f'{op}: {name} must be a floating-point tensor, got {t.dtype}; '
            f'convert it with .float()')


def check_same_device(op: str, first: tuple[str, Tensor], *others: tuple[str, Tensor]) -> None:
    """Every ``(name, tensor)`` of ``others`` on the device of ``first``."""
    for name, t in others:
        require(t.device == first[1].device, f'{op}: {name} is on {t.device} but {first[0]} is on '
                f'{first[1].device}; move both to the same device')


def check_out(op: str, name: str, t: Tensor, shape: tuple[int, ...]) -> None:
    """An output buffer ``t`` the op writes into has ``shape``."""
    require(tuple(t.shape) == tuple(shape), f'{op}: {name} must have shape {tuple(shape)}, got {tuple(t.shape)}')


def kernel_dtype(t: Tensor) -> torch.dtype:
    """The dtype torchvision's kernels take for ``t``: they have no bfloat16 kernels, and no
    float16 ones on CPU, so those run in float32 (what autocast would pick for these ops anyway)."""
    if t.dtype == torch.bfloat16 or (t.dtype == torch.float16 and t.device.type == 'cpu'):
        return torch.float32
    return t.dtype
