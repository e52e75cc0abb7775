"""Hands each image's real size to the InLine backbones of a detector or segmentor.

MMDetection and MMSegmentation pad every image of a batch to the largest one (and to
the size divisor). Global InLine attention sums over all tokens, so without a mask the
padding of a batch-mate changes an image's features. The data samples already carry
each image's size before padding (``img_shape``); this module reads it at the start of
every forward of the whole model and passes it to the backbones as ``valid_hw`` (through
:class:`inline_dense.layers.padding.PaddedBatchSizes`, as the torchvision adapter does).

It is on by itself: an OpenMMLab InLine backbone (:mod:`inline_dense.openmmlab.backbones`)
assigned to a model (``self.backbone = MODELS.build(...)`` in every detector and segmentor)
installs it on that model (a torch module-registration hook, :func:`install`), so every way of
running it reads the data samples: a Runner, ``model.test_step``, ``DetInferencer``,
``MMSegInferencer``, ``inference_detector`` / ``inference_model``. Explicitly:

* ``enable_padding_mask(model)`` (idempotent; returns the handle, whose ``remove()`` turns it off);
* the ``InLinePaddingMaskHook`` (``custom_hooks=[dict(type='InLinePaddingMaskHook')]``), which
  does the same for a Runner's model.
"""
import inspect
import logging
import weakref
from collections.abc import Sequence
from typing import Any

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS
from torch import nn
from torch.nn.modules.module import register_module_module_registration_hook
from torch.utils.hooks import RemovableHandle

from ... import registry
from ...layers.backbone import InLineBackboneBase
from ...layers.padding import PaddedBatchSizes
from ...typing import HW
from ..backbones import OpenMMLabBackbone

_HANDLE_ATTR = '_inline_padding_mask'


def image_shapes(data_samples: Any) -> list[HW] | None:
    """``[(h, w), ...]`` from the ``img_shape`` of each data sample, or None if any lacks one.

    Works for mmdet ``DetDataSample``, mmseg ``SegDataSample`` (both keep ``img_shape``, the
    image size before batch padding) and plain dicts of meta information.
    """
    if not isinstance(data_samples, (list, tuple)) or not data_samples:
        return None
    shapes = []
    for sample in data_samples:
        meta = sample if isinstance(sample, dict) else getattr(sample, 'metainfo', None)
        if not isinstance(meta, dict) or meta.get('img_shape') is None:
            return None
        h, w = meta['img_shape'][:2]
        shapes.append((int(h), int(w)))
    return shapes


class PaddingMaskHandle:
    """The hooks ``enable_padding_mask`` installed; ``remove()`` uninstalls them.

    Between the start and the end of one forward of the whole model it holds each image's
    ``valid_hw`` in the padded batch (``sizes``). A backbone call receives them only if its input
    is that very batch (same batch size and spatial size), so a backbone run on crops (slide
    inference) or on other tensors is left alone.
    """

    def __init__(self, model: nn.Module, backbones: list[nn.Module]) -> None:
        self.sizes = PaddedBatchSizes()
        self._handles = [
            model.register_forward_pre_hook(self._before_model, with_kwargs=True),
            model.register_forward_hook(self._after_model, always_call=True),
        ]
        # weak: the model and its backbones hold the handle (their hooks, the model's attribute), so
        # strong references back would make a cycle that keeps the weights until the next full collection
        self._backbones: list[weakref.ref[nn.Module]] = []
        self._model = weakref.ref(model)
        for backbone in backbones:
            self.add_backbone(backbone)

    @property
    def backbones(self) -> list[nn.Module]:
        """The backbones that get the sizes (those still alive)."""
        return [b for b in (ref() for ref in self._backbones) if b is not None]

    def add_backbone(self, backbone: nn.Module) -> None:
        """Hands the sizes to ``backbone`` too (once)."""
        if any(b is backbone for b in self.backbones):
            return
        self._backbones.append(weakref.ref(backbone))
        self._handles.append(backbone.register_forward_pre_hook(self._before_backbone, with_kwargs=True))

    @property
    def valid_hw(self) -> list[HW] | None:
        """Each image's real size in the batch of the current forward; None outside one."""
        return self.sizes.sizes

    def remove(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        model = self._model()
        if model is not None and getattr(model, _HANDLE_ATTR, None) is self:
            delattr(model, _HANDLE_ATTR)

    def _before_model(self, module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> None:  # noqa: ARG002
        inputs = kwargs.get('inputs', args[0] if args else None)
        samples = kwargs.get('data_samples', args[1] if len(args) > 1 else None)
        shapes = image_shapes(samples)
        if isinstance(inputs, torch.Tensor) and inputs.ndim == 4 and shapes and len(shapes) == inputs.shape[0]:
            self.sizes.record(inputs, shapes)
        else:
            self.sizes.clear()

    def _after_model(self, module: nn.Module, args: tuple, output: Any) -> None:  # noqa: ARG002
        self.sizes.clear()

    def _before_backbone(self, module: nn.Module, args: tuple,  # noqa: ARG002
                         kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]] | None:
        if len(args) != 1 or kwargs.get('valid_hw') is not None:
            return None
        sizes = self.sizes.for_input(args[0])
        return None if sizes is None else (args, dict(kwargs, valid_hw=sizes))


def inline_backbones(model: nn.Module) -> list[nn.Module]:
    """Every InLine backbone (of any family) inside ``model``, the model itself included."""
    return [m for m in model.modules() if isinstance(m, InLineBackboneBase)]


def enable_padding_mask(model: nn.Module) -> PaddingMaskHandle:
    """Makes the InLine backbones of ``model`` ignore batch padding. Idempotent.

    ``model`` is a detector or segmentor (or a wrapper such as DDP, whose ``module`` is
    used) called as ``model(inputs, data_samples, mode=...)``, e.g. through ``test_step``.
    Returns the handle; ``handle.remove()`` restores the plain behaviour.
    """
    if is_model_wrapper(model):
        model = model.module
    handle = getattr(model, _HANDLE_ATTR, None)
    if isinstance(handle, PaddingMaskHandle):
        return handle
    handle = PaddingMaskHandle(model, inline_backbones(model))
    object.__setattr__(model, _HANDLE_ATTR, handle)
    return handle


def _on_registration(module: nn.Module, name: str, submodule: nn.Module | None) -> None:  # noqa: ARG001
    """torch's module-registration hook: an OpenMMLab InLine backbone assigned to ``module`` (a
    detector or segmentor: its forward takes ``data_samples``) gets the padding mask of ``module``'s
    forward. Other holders (``torch.compile``'s wrapper, a Sequential) are left alone."""
    if not isinstance(submodule, OpenMMLabBackbone) or not _takes_data_samples(module):
        return None
    handle = module.__dict__.get(_HANDLE_ATTR)  # not getattr: a wrapper's __getattr__ may not be ready
    if isinstance(handle, PaddingMaskHandle):
        handle.add_backbone(submodule)
    else:
        object.__setattr__(module, _HANDLE_ATTR, PaddingMaskHandle(module, [submodule]))
    return None


def _takes_data_samples(module: nn.Module) -> bool:
    """Whether ``module``'s forward has a ``data_samples`` parameter (mmengine's models)."""
    try:
        return 'data_samples' in inspect.signature(type(module).forward).parameters
    except (TypeError, ValueError):  # no signature to read
        return False


_REGISTRATION: list[RemovableHandle] = []


def install() -> None:
    """Turns the padding mask on for every model an OpenMMLab InLine backbone is assigned to from now
    on (see the module's docstring). Idempotent."""
    if not _REGISTRATION:
        _REGISTRATION.append(register_module_module_registration_hook(_on_registration))


install()


@HOOKS.register_module()
class InLinePaddingMaskHook(Hook):
    """Runner hook: before training, validation and testing, ``enable_padding_mask(runner.model)``.

    Config: ``custom_hooks = [dict(type='InLinePaddingMaskHook')]``.
    """

    priority = 'NORMAL'

    def _enable(self, runner) -> None:
        handle = enable_padding_mask(runner.model)
        if not handle.backbones and not getattr(self, '_warned', False):
            self._warned = True
            names = ', '.join(spec.class_name for spec in registry.FAMILIES.values())
            print_log(f'InLinePaddingMaskHook: the model has no InLine backbone ({names}); the hook does nothing '
                      f'(remove it from custom_hooks).', logger='current', level=logging.WARNING)

    def before_train(self, runner) -> None:
        self._enable(runner)

    def before_val(self, runner) -> None:
        self._enable(runner)

    def before_test(self, runner) -> None:
        self._enable(runner)


def padded_batch(images: Sequence[torch.Tensor], size_divisor: int = 1,
                 pad_value: float = 0.0) -> tuple[torch.Tensor, list[HW]]:
    """Pads (C, H_i, W_i) images bottom/right to one (B, C, H, W) batch, as the data
    preprocessors do; returns it with the real sizes, ready for ``backbone(x, valid_hw)``."""
    hs = [im.shape[-2] for im in images]
    ws = [im.shape[-1] for im in images]
    h = -(-max(hs) // size_divisor) * size_divisor
    w = -(-max(ws) // size_divisor) * size_divisor
    batch = images[0].new_full((len(images), images[0].shape[0], h, w), pad_value)
    for i, im in enumerate(images):
        batch[i, :, :im.shape[-2], :im.shape[-1]] = im
    return batch, list(zip(hs, ws))
