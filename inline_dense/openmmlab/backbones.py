"""The InLine backbones as OpenMMLab modules: ``init_cfg``, ``init_weights()`` and registration.

Each class here (one per family of :mod:`inline_dense.registry`) is the torch-only core class
(:mod:`inline_dense.models`) with mmengine's ``BaseModule`` behind it and :class:`OpenMMLabBackbone`
in front, registered in mmengine's root ``MODELS`` under the core's name (mmdet's and mmseg's
``MODELS`` are children of it). The class names are mmdet's config vocabulary (``type='InLineSwin'``),
so they are spelled out here, the one module outside the families that names them: explicit
subclasses, which a type checker reads (tests check that every family of the package has one). A
family registered at run time (:func:`inline_dense.registry.register`) gets the same class, made
and registered when it registers.
Nothing of the architecture is repeated: the MRO is adapter mixin -> core family -> core base ->
``BaseModule`` -> ``nn.Module``, so the core's ``super().__init__()`` is ``BaseModule``'s.

Construction does not initialise the weights (``init_at_construction = False``): as before the
split, the runner's ``init_weights()`` does, after the whole detector or segmentor is built, so
the random numbers the neck and head draw at construction are the same as before.
"""
import copy
import inspect
from typing import TYPE_CHECKING, Any

import torch
from mmengine.model import BaseModule
from mmengine.model.weight_init import initialize
from mmengine.registry import MODELS

from .. import models as core
from .. import registry, variants
from ..checkpoint import INIT_CFG, load_pretrained
from ..families import backbone_class
from ..families.spec import FamilySpec

InitCfg = dict | list[dict] | None

if TYPE_CHECKING:  # what the mixin stands in front of (at run time it adds no base class)
    from ..layers.backbone import InLineBackboneBase as _Core
else:
    _Core = object


def check_init_cfg(init_cfg: Any, backbone: str) -> InitCfg:
    """``init_cfg`` as mmengine allows it (None, a dict, a list of dicts), checked early."""
    entries = init_cfg if isinstance(init_cfg, list) else [init_cfg] if init_cfg is not None else []
    for entry in entries:
        if not isinstance(entry, dict) or 'type' not in entry:
            raise TypeError(f"{backbone}: init_cfg must be None, a dict with a 'type' (e.g. dict(type='Pretrained', "
                            f"checkpoint='inline://{variants.EXAMPLE}')) or a list of such dicts; got {init_cfg!r}.")
        if entry['type'] == 'Pretrained' and not entry.get('checkpoint'):
            raise ValueError(f"{backbone}: init_cfg=dict(type='Pretrained') needs checkpoint=PATH (a file, a URL "
                             f"or a name such as 'inline://{variants.EXAMPLE}').")
    return init_cfg


class OpenMMLabBackbone(_Core):
    """In front of a core family and ``BaseModule``: takes ``init_cfg`` and gives ``init_weights()``.

    Args (besides the core family's):
        init_cfg: None (from scratch), a dict or a list of dicts; ``Pretrained`` entries load
            through :func:`inline_dense.checkpoint.load_pretrained` (strict, the authors' layout
            converted), other entries through mmengine's initialisers.
    """

    init_at_construction = False

    def __init__(self, *args: Any, init_cfg: InitCfg = None, **kwargs: Any) -> None:
        checked = check_init_cfg(init_cfg, type(self).__name__)
        super().__init__(*args, **kwargs)  # the core family, whose base ends in BaseModule(init_cfg=None)
        self.init_cfg = copy.deepcopy(checked)

    def forward(self, x: torch.Tensor, valid_hw: list[tuple[int, int]] | None = None) -> list[torch.Tensor]:
        """The core's (B, C_i, H_i, W_i) maps, each contiguous, as mmdet's and mmseg's own backbones give
        them. The core returns channels-last views of its tokens (no copy); a head that joins levels with
        maps of its own, such as UperNet's concatenation of four levels at stride 4, then meets mixed
        layouts, and that ``torch.cat`` takes the slow strided path (4.4 s instead of 0.26 s at 1024x2048,
        for a copy here of 0.05 s at 800x1216)."""
        return tuple(out.contiguous() for out in super().forward(x, valid_hw))  # type: ignore[return-value]

    def init_weights(self) -> None:
        """``init_cfg`` entries other than ``Pretrained`` run through mmengine's initialisers
        (without any, ``init_from_scratch``); then ``Pretrained`` entries load strictly."""
        entries = self.init_cfg if isinstance(self.init_cfg, list) else [self.init_cfg] if self.init_cfg else []
        pretrained = [e for e in entries if e['type'] == 'Pretrained']
        others = [e for e in entries if e['type'] != 'Pretrained']
        self.init_from_scratch()  # also what a classification checkpoint lacks (output norms)
        if others:
            initialize(self, others)
        options = set(inspect.signature(load_pretrained).parameters) - {'model', 'checkpoint', 'advice'}
        for entry in pretrained:
            extra = {k: v for k, v in entry.items() if k not in ('type', 'checkpoint')}
            unknown = sorted(set(extra) - options)
            if unknown:
                raise ValueError(f'{type(self).__name__}: init_cfg Pretrained option(s) {unknown} are not '
                                 f'supported; supported: {sorted(options)}.')
            load_pretrained(self, entry['checkpoint'], advice=INIT_CFG, **extra)
        self._is_init = True


def adapter_doc(core_cls: type) -> str:
    """The core class's docstring, then the adapter's arguments."""
    return (core_cls.__doc__ or '') + (OpenMMLabBackbone.__doc__ or '').split('\n', 1)[1]


# one class per family of inline_dense.registry, each registered under the core class's name
@MODELS.register_module()
class InLineSwin(OpenMMLabBackbone, core.InLineSwin, BaseModule):
    __doc__ = adapter_doc(core.InLineSwin)


@MODELS.register_module()
class InLinePVT(OpenMMLabBackbone, core.InLinePVT, BaseModule):
    __doc__ = adapter_doc(core.InLinePVT)


@MODELS.register_module()
class InLineCSwin(OpenMMLabBackbone, core.InLineCSwin, BaseModule):
    __doc__ = adapter_doc(core.InLineCSwin)


@MODELS.register_module()
class InLineDeiT(OpenMMLabBackbone, core.InLineDeiT, BaseModule):
    __doc__ = adapter_doc(core.InLineDeiT)


__all__ = ['OpenMMLabBackbone', 'adapter_doc', 'check_init_cfg', 'InLineSwin', 'InLinePVT', 'InLineCSwin', 'InLineDeiT']


def _register_family(spec: FamilySpec) -> None:
    """A family without a class above (one registered at run time, :func:`inline_dense.registry.register`)
    gets the same: its core class with the adapter in front, registered under the core's name."""
    if spec.class_name in globals():
        return
    core_cls = backbone_class(spec)
    cls = type(spec.class_name, (OpenMMLabBackbone, core_cls, BaseModule),
               dict(__doc__=adapter_doc(core_cls), __module__=__name__))
    MODELS.register_module(module=cls)
    globals()[spec.class_name] = cls
    __all__.append(spec.class_name)


registry.follow(_register_family)
