"""InLine backbones in plain torch: importing, building, running and loading the authors'
checkpoints need torch alone (no OpenMMLab, no timm). Each model is initialised when it is
constructed; ``inline_dense.checkpoint.load_pretrained`` loads pretrained weights into it.

For MMDetection / MMSegmentation, ``import inline_dense.openmmlab`` registers subclasses of these
under the same names, with ``init_cfg`` and ``init_weights()``."""
from .inline_attention import InLineAttention
from .inline_cswin import InLineCSwin
from .inline_pvt import InLinePVT
from .inline_swin import InLineSwin

__all__ = ['InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin']
