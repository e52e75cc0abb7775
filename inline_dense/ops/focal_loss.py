"""mmcv's ``sigmoid_focal_loss_*`` and ``softmax_focal_loss_*`` for the stand-in
:mod:`inline_dense.ops.ext`: plain torch, gradients by autograd."""
import torch
import torch.nn.functional as F
from torch import Tensor

from .checks import OpInputError, check_float, check_out, check_same_device, require


def _check_focal(op: str, logits: Tensor, target: Tensor, weight: Tensor, background: bool) -> None:
    """Logits or probabilities (N, C), int64 targets (N,) in [0, C) (or [0, C] with C the
    ``background``), weight empty or (C,)."""
    require(logits.dim() == 2, f'{op}: input must be (N, C) scores, got shape {tuple(logits.shape)}')
    max_target = logits.shape[1] if background else logits.shape[1] - 1
    check_float(op, 'input', logits)
    require(target.dtype == torch.long, f'{op}: target must be int64 class indices, got {target.dtype}; '
            'use target.long()')
    require(target.dim() == 1 and target.shape[0] == logits.shape[0],
            f'{op}: target must be (N,) = ({logits.shape[0]},) to match input, got shape {tuple(target.shape)}')
    require(weight.numel() == 0 or (weight.dim() == 1 and weight.shape[0] == logits.shape[1]),
            f'{op}: weight must be empty or one weight per class ({logits.shape[1]},), got shape '
            f'{tuple(weight.shape)}')
    check_same_device(op, ('input', logits), ('target', target), ('weight', weight))
    if target.numel() and bool(((target < 0) | (target > max_target)).any()):
        bad = target[(target < 0) | (target > max_target)][0]
        raise OpInputError(f'{op}: target holds class {int(bad)}, outside [0, {max_target}] for {logits.shape[1]} '
                           "classes; check the head's num_classes against the dataset's classes")


def _sigmoid_focal(logits: Tensor, target: Tensor, weight: Tensor, gamma: float, alpha: float) -> Tensor:
    """Per-element sigmoid focal loss (N, C); class ``target[n]`` is positive (C means none)."""
    num_classes = logits.shape[1]
    pos = F.one_hot(target.clamp(max=num_classes), num_classes + 1)[:, :num_classes].to(logits.dtype)
    p = logits.sigmoid()
    loss = -alpha * pos * (1 - p).pow(gamma) * F.logsigmoid(logits) \
        - (1 - alpha) * (1 - pos) * p.pow(gamma) * F.logsigmoid(-logits)
    return loss * _per_sample_weight(weight, target, num_classes, logits)[:, None]


def _per_sample_weight(weight: Tensor, target: Tensor, num_classes: int, like: Tensor) -> Tensor:
    """mmcv scales sample n by ``weight[target[n]]``; background samples (target == C) keep 1."""
    if weight.numel() == 0:
        return torch.ones(target.shape, dtype=like.dtype, device=like.device)
    padded = torch.cat([weight.to(like.dtype), weight.new_ones(1, dtype=like.dtype)])
    return padded[target.clamp(max=num_classes)]


def _enter_focal(entry: str, x: Tensor, target: Tensor, weight: Tensor,
                 out: tuple[str, Tensor, tuple[int, ...]]) -> None:
    """Checks the inputs of the focal-loss op ``entry`` ('sigmoid_focal_loss_forward', ...) and its
    output buffer ``out`` (name, tensor, expected shape); messages name the op as mmcv does
    ('sigmoid_focal_loss', 'softmax_focal_loss (backward)')."""
    kind, direction = entry.rsplit('_', 1)
    op = kind if direction == 'forward' else f'{kind} (backward)'
    _check_focal(op, x, target, weight, background=kind.startswith('sigmoid'))
    check_out(op, *out)


def sigmoid_focal_loss_forward(input: Tensor, target: Tensor, weight: Tensor, output: Tensor, *,
                               gamma: float, alpha: float) -> None:
    """Fills ``output`` (N, C) with the per-element loss of logits ``input`` (N, C)."""
    _enter_focal('sigmoid_focal_loss_forward', input, target, weight, ('output', output, tuple(input.shape)))
    with torch.no_grad():
        output.copy_(_sigmoid_focal(input, target, weight, gamma, alpha))


def sigmoid_focal_loss_backward(input: Tensor, target: Tensor, weight: Tensor, grad_input: Tensor, *,
                                gamma: float, alpha: float) -> None:
    """Fills ``grad_input`` (N, C) with d(loss[n, c]) / d(input[n, c])."""
    _enter_focal('sigmoid_focal_loss_backward', input, target, weight, ('grad_input', grad_input, tuple(input.shape)))
    with torch.enable_grad():
        x = input.detach().requires_grad_(True)
        grad, = torch.autograd.grad(_sigmoid_focal(x, target, weight, gamma, alpha).sum(), x)
    grad_input.copy_(grad)


def _softmax_focal(log_p: Tensor, target: Tensor, weight: Tensor, gamma: float, alpha: float) -> Tensor:
    """Per-sample softmax focal loss (N,) from log-probabilities (N, C)."""
    log_pt = log_p.gather(1, target[:, None]).squeeze(1)
    loss = -alpha * (1 - log_pt.exp()).pow(gamma) * log_pt
    return loss * _per_sample_weight(weight, target, log_p.shape[1], log_p)


def softmax_focal_loss_forward(softmax: Tensor, target: Tensor, weight: Tensor, output: Tensor, *,
                               gamma: float, alpha: float) -> None:
    """Fills ``output`` (N,) from class probabilities ``softmax`` (N, C)."""
    _enter_focal('softmax_focal_loss_forward', softmax, target, weight, ('output', output, tuple(softmax.shape[:1])))
    with torch.no_grad():
        log_p = softmax.clamp(min=torch.finfo(softmax.dtype).tiny).log()
        output.copy_(_softmax_focal(log_p, target, weight, gamma, alpha))


def softmax_focal_loss_backward(softmax: Tensor, target: Tensor, weight: Tensor, buff: Tensor,
                                grad_input: Tensor, *, gamma: float, alpha: float) -> None:
    """Fills ``grad_input`` (N, C) with the gradient w.r.t. the logits behind ``softmax``.

    log(softmax) differs from those logits by a per-row constant, which softmax ignores, so the
    gradient through it is the gradient w.r.t. the logits.
    """
    _enter_focal('softmax_focal_loss_backward', softmax, target, weight,
                 ('grad_input', grad_input, tuple(softmax.shape)))
    with torch.enable_grad():
        logits = softmax.detach().clamp(min=torch.finfo(softmax.dtype).tiny).log().requires_grad_(True)
        loss = _softmax_focal(F.log_softmax(logits, dim=1), target, weight, gamma, alpha).sum()
        grad, = torch.autograd.grad(loss, logits)
    grad_input.copy_(grad)


