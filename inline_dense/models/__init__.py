"""InLine backbones, registered in mmdet's and mmseg's MODELS registries on import."""
from .inline_attention import InLineAttention
from .inline_cswin import InLineCSwin
from .inline_pvt import InLinePVT
from .inline_swin import InLineSwin
from .registry import register_backbones

register_backbones()

__all__ = ['InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin']
