"""InLine backbones in plain torch: importing, building, running and loading the authors'
checkpoints need torch alone (no OpenMMLab, no timm). Each model is initialised when it is
constructed; ``inline_dense.checkpoint.load_pretrained`` loads pretrained weights into it.

The public names of the core. Each family lives in ``inline_dense.families.<name>`` (its spec, its
model, its converter, its own softmax attention); the shared bricks in :mod:`inline_dense.layers`.
The module paths that moved from here keep working for one release, with a ``DeprecationWarning``
(:mod:`.moved`).

For MMDetection / MMSegmentation, ``import inline_dense.openmmlab`` registers subclasses of these
under the same names, with ``init_cfg`` and ``init_weights()``."""
from ..families.cswin.model import InLineCSwin
from ..families.deit.model import InLineDeiT
from ..families.pvt.model import InLinePVT
from ..families.swin.model import InLineSwin
from ..layers.inline_attention import InLineAttention
from . import moved

moved.install()

__all__ = ['InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin', 'InLineDeiT']
