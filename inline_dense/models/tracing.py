"""What symbolic tracing (``torch.fx``) must leave alone in the InLine backbones, for every family.

The attentions branch on their grid's size and on the padding mask, which are values at run time
in a traced graph: trace them as leaf modules (``FX_LEAF_MODULES``). The helpers around the stages
that branch the same way are ``torch.fx.wrap``-ped where they are defined (so plain
``torch.fx.symbolic_trace`` keeps them as calls); ``FX_AUTOWRAP_FUNCTIONS`` lists them for tracers
that take ``autowrap_functions``. Both are filled where each brick is defined
(:mod:`inline_dense.layers.tracing`'s ``@fx_leaf`` / ``@fx_wrap``), once every family is imported.

    from torchvision.models.feature_extraction import create_feature_extractor
    create_feature_extractor(backbone, ['taps.3'], tracer_kwargs=dict(leaf_modules=list(FX_LEAF_MODULES)))

timm users need nothing: ``import inline_dense.timm`` registers both lists with timm's
``register_notrace_module`` / ``register_notrace_function`` (``feature_cls='fx'``).
"""
from collections.abc import Callable

from torch import nn

from .. import models  # noqa: F401  (every family's model: their bricks mark themselves as imported)
from ..layers import tracing

FX_LEAF_MODULES: tuple[type[nn.Module], ...] = tuple(tracing.LEAF_MODULES)
FX_AUTOWRAP_FUNCTIONS: tuple[Callable, ...] = tuple(tracing.AUTOWRAP_FUNCTIONS)
