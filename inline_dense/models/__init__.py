"""InLine backbones in plain torch: importing, building, running and loading the authors'
checkpoints need torch alone (no OpenMMLab, no timm). Each model is initialised when it is
constructed; ``inline_dense.checkpoint.load_pretrained`` loads pretrained weights into it.

The public names of the core. Each family lives in ``inline_dense.families.<name>`` (its spec, its
model, its converter, its own softmax attention); the shared bricks in :mod:`inline_dense.layers`.
The module paths that moved from here keep working for one release, with a ``DeprecationWarning``
(:mod:`.moved`).

For MMDetection / MMSegmentation, ``import inline_dense.openmmlab`` registers subclasses of these
under the same names, with ``init_cfg`` and ``init_weights()``. A family registered at run time
(:func:`inline_dense.registry.register`) is a name here as well."""
from .. import registry
from ..families import backbone_class
from ..families.cswin.model import InLineCSwin
from ..families.deit.model import InLineDeiT
from ..families.pvt.model import InLinePVT
from ..families.swin.model import InLineSwin
from ..layers.inline_attention import InLineAttention
from . import moved

moved.install()

__all__ = ['InLineAttention', 'InLineSwin', 'InLinePVT', 'InLineCSwin', 'InLineDeiT']
# a family registered at run time (registry.register) is a public name too, served by __getattr__
registry.follow(lambda spec: None if spec.class_name in __all__ else __all__.append(spec.class_name))


def __getattr__(name: str) -> type:  # PEP 562: the classes of families registered at run time
    spec = registry.family_of_class(name)
    if spec is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    return backbone_class(spec)
