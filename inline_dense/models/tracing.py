"""What symbolic tracing (``torch.fx``) must leave alone in the InLine backbones.

The attentions branch on their grid's size and on the padding mask, which are values at run time
in a traced graph: trace them as leaf modules. The helpers around the stages that branch the same
way are ``torch.fx.wrap``-ped where they are called (so plain ``torch.fx.symbolic_trace`` keeps them
as calls); ``FX_AUTOWRAP_FUNCTIONS`` lists them for tracers that take ``autowrap_functions``.

    from torchvision.models.feature_extraction import create_feature_extractor
    create_feature_extractor(backbone, ['taps.3'], tracer_kwargs=dict(leaf_modules=list(FX_LEAF_MODULES)))

timm users need nothing: ``import inline_dense.timm`` registers both lists with timm's
``register_notrace_module`` / ``register_notrace_function`` (``feature_cls='fx'``).
"""
from typing import Callable, Tuple, Type

from torch import nn

from ..families.cswin.stripe_attention import CSwinStripeAttention
from ..families.pvt.model import stage_position
from ..families.pvt.sr_attention import SRAttention
from ..families.swin.model import pad_grid_to_even
from ..families.swin.window_attention import ShiftWindowMSA
from ..layers.backbone import check_image_input, pad_to_min_size, valid_token_mask, zero_padding
from ..layers.block import TokenAttention, pad_to_multiple
from ..layers.inline_attention import InLineAttention

# the attentions: each answers layers.TokenAttention (mypy checks this assignment)
ATTENTIONS: Tuple[Type[TokenAttention], ...] = (InLineAttention, ShiftWindowMSA, SRAttention, CSwinStripeAttention)
FX_LEAF_MODULES: Tuple[Type[nn.Module], ...] = (InLineAttention, ShiftWindowMSA, SRAttention, CSwinStripeAttention)
FX_AUTOWRAP_FUNCTIONS: Tuple[Callable, ...] = (check_image_input, pad_to_min_size, valid_token_mask, zero_padding,
                                               stage_position, pad_grid_to_even, pad_to_multiple)
