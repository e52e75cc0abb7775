"""One backbone class, registered in every installed OpenMMLab MODELS registry."""
import importlib
from typing import List

REGISTRY_MODULES = ('mmdet.registry', 'mmseg.registry')


def register_backbones() -> List[str]:
    """Registers InLineSwin, InLinePVT and InLineCSwin in mmdet's and mmseg's ``MODELS``.

    A package that is not installed is skipped; returns the registries used.
    """
    from .inline_cswin import InLineCSwin
    from .inline_pvt import InLinePVT
    from .inline_swin import InLineSwin

    used = []
    for module_name in REGISTRY_MODULES:
        try:
            registry = importlib.import_module(module_name).MODELS
        except ImportError:
            continue
        for cls in (InLineSwin, InLinePVT, InLineCSwin):
            # module_dict, not get(): get() would import all of mmdet.models / mmseg.models
            if registry.module_dict.get(cls.__name__) is not cls:
                registry.register_module(name=cls.__name__, module=cls, force=True)
        used.append(module_name)
    return used
