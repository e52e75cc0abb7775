"""Layer-wise learning-rate decay for a plain backbone (a family whose spec is ``plain``), ViTDet's rule, as an mmengine
optimizer-wrapper constructor (``LayerDecayOptimWrapperConstructor`` in mmengine's root
``OPTIM_WRAPPER_CONSTRUCTORS``; mmdet's only layer-decay constructor accepts ConvNeXt alone).

    optim_wrapper = dict(type='OptimWrapper', optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.1),
                         constructor='LayerDecayOptimWrapperConstructor', paramwise_cfg=dict(decay_rate=0.7))

With ``L`` the backbone's number of blocks, each parameter gets a layer id: the stem
(``backbone.patch_embed.*``: patch embedding, position embedding, cls token) 0, block ``i`` (0-based,
``backbone.stages.i.*``) ``i + 1``, everything else (the backbone's output norms, the neck, the heads)
``L + 1``; its learning rate is ``lr * decay_rate ** (L + 1 - layer_id)``. So the stem has
``decay_rate ** (L + 1)``, block ``i`` ``decay_rate ** (L - i)`` and the neck and heads 1: detectron2's
``get_vit_lr_decay_rate`` (ViTDet's), with ``num_layers = L``. (mmdet's and BEiT's
``get_layer_id_for_vit`` count the same ids with ``num_layers = L + 2``.)

No weight decay (``weight_decay = 0``) for the parameters of normalisation layers (LayerNorm, LN2d,
GroupNorm, BatchNorm: backbone, neck and heads), for every bias, and for the position embedding and
the cls token; the others keep the optimizer's ``weight_decay``. One parameter group per
(layer id, decayed or not).
"""
import numbers

from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from ...families import backbone_class
from ...layers.simple_pyramid import LayerNorm2d
from ...registry import FAMILIES

NAME = 'LayerDecayOptimWrapperConstructor'
NORMS = (nn.LayerNorm, nn.GroupNorm, _BatchNorm, LayerNorm2d)
NO_DECAY_NAMES = ('pos_embed', 'cls_token')
PLAIN_TYPES = ' or '.join(f"type='{spec.class_name}'" for spec in FAMILIES.values() if spec.plain)


def plain_blocks(model: nn.Module) -> int:
    """The number of blocks of ``model.backbone``, which must be one of the registry's plain families
    (:data:`PLAIN_TYPES`, ``FamilySpec.plain``: its stages are its blocks); a one-line error otherwise,
    also for a pyramid whose stages each hold one block."""
    backbone = getattr(model, 'backbone', None)
    if backbone is None:
        raise ValueError(f'{NAME}: the model ({type(model).__name__}) has no .backbone; layer decay is for a '
                         f'detector or segmentor with a plain backbone ({PLAIN_TYPES}): drop constructor={NAME!r}.')
    if not any(isinstance(backbone, backbone_class(spec)) for spec in FAMILIES.values() if spec.plain):
        raise ValueError(f'{NAME}: the backbone {type(backbone).__name__} is not a plain ViT (the registry\'s plain '
                         f'families: {PLAIN_TYPES}); use the constructor with those, or drop constructor={NAME!r} '
                         f'for hierarchical backbones.')
    return len(backbone.stages)


def layer_id(name: str, num_layers: int) -> int:
    """ViTDet's layer id of the parameter ``name`` (a name in the detector / segmentor)."""
    if name.startswith('backbone.patch_embed.'):
        return 0
    if name.startswith('backbone.stages.'):
        return int(name.split('.')[2]) + 1
    return num_layers + 1


def no_decay_names(model: nn.Module) -> set[str]:
    """Names of the parameters kept out of weight decay: norms, biases, position embedding, cls token."""
    names = set()
    for module_name, module in model.named_modules():
        for param_name, _ in module.named_parameters(recurse=False):
            full = f'{module_name}.{param_name}' if module_name else param_name
            if isinstance(module, NORMS) or param_name == 'bias' or param_name in NO_DECAY_NAMES:
                names.add(full)
    return names


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class LayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """ViTDet's layer-wise lr decay (module docstring). ``paramwise_cfg=dict(decay_rate=r)``, ``0 < r <= 1``."""

    def __init__(self, optim_wrapper_cfg: dict, paramwise_cfg: dict | None = None) -> None:
        cfg = dict(paramwise_cfg or {})
        rate = cfg.pop('decay_rate', None)
        if cfg:
            raise ValueError(f'{NAME}: paramwise_cfg takes decay_rate only (norms, biases, pos_embed and cls_token '
                             f'are kept out of weight decay already); remove {sorted(cfg)}.')
        if (not isinstance(rate, numbers.Real) or isinstance(rate, bool) or not 0 < rate <= 1):
            raise ValueError(f'{NAME}: paramwise_cfg=dict(decay_rate=...) must be a number in (0, 1], got {rate!r}; '
                             f"ViTDet uses 0.7 for ViT-B (1.0 turns the decay off).")
        super().__init__(optim_wrapper_cfg, dict(decay_rate=rate))
        self.decay_rate = float(rate)

    def add_params(self, params: list[dict], module: nn.Module, prefix: str = '',  # type: ignore[override]  # noqa: ARG002
                   is_dcn_module: bool | None = None) -> None:  # noqa: ARG002
        """Appends one group per (layer id, weight decay or not) to ``params``, for ``module`` (the model)."""
        num_layers = plain_blocks(module)
        exempt = no_decay_names(module)
        groups: dict[tuple[int, bool], dict] = {}
        for name, param in module.named_parameters():
            lid = layer_id(name, num_layers)
            decay = name not in exempt
            if (lid, decay) not in groups:
                scale = self.decay_rate ** (num_layers + 1 - lid)
                groups[lid, decay] = dict(params=[], lr=self.base_lr * scale,
                                          weight_decay=self.base_wd if decay and self.base_wd else 0.0,
                                          layer_id=lid, lr_scale=scale)
            groups[lid, decay]['params'].append(param)
        params.extend(groups[key] for key in sorted(groups))
        print_log(f'{NAME}: {num_layers} blocks, decay_rate {self.decay_rate}: {len(groups)} parameter groups, '
                  f'lr scale {self.decay_rate ** (num_layers + 1):.3g} (stem) to 1 (neck, heads)', logger='current')
