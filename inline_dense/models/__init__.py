"""InLine backbones. Each class registers itself in mmengine's root ``MODELS`` registry where it
is defined (``@MODELS.register_module()``); mmdet's and mmseg's ``MODELS`` are children of it and
find the backbones there, whichever of them is installed or imported first."""
from .inline_attention import InLineAttention
from .inline_cswin import InLineCSwin
from .inline_pvt import InLinePVT
from .inline_swin import InLineSwin

__all__ = ['InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin']
