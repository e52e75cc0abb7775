"""What symbolic tracing (``torch.fx``) must leave alone in the InLine backbones, marked where each
brick is defined.

The attentions branch on their grid's size and on the padding mask, which are values at run time
in a traced graph: ``@fx_leaf`` marks such a module class, to be traced as a leaf module. The helpers
that branch the same way are marked ``@fx_wrap``: ``torch.fx.wrap`` is applied in their own module,
so plain ``torch.fx.symbolic_trace`` keeps them as calls, and they are listed for tracers that take
``autowrap_functions``. ``torch.fx.wrap`` patches the name in the defining module only, so a helper
called from another module is called through its module (``padding.pad_to_multiple(x, 4)``), never
imported by name.

The lists are filled as the modules are imported; :mod:`inline_dense.models.tracing` imports every
family first and gives them whole (``FX_LEAF_MODULES``, ``FX_AUTOWRAP_FUNCTIONS``)."""
import sys
from collections.abc import Callable
from typing import TypeVar

import torch
from torch import nn

LEAF_MODULES: list[type[nn.Module]] = []
AUTOWRAP_FUNCTIONS: list[Callable] = []

M = TypeVar('M', bound=type[nn.Module])
F = TypeVar('F', bound=Callable)

# ``torch.fx.wrap`` must be called from the top level of the module that defines the function (it
# records that module's globals): this code runs with those globals as a module's top level does
_WRAP = compile('wrap(name)', __name__, 'exec')


def fx_leaf(cls: M) -> M:
    """Marks a module class that symbolic tracing keeps as one call (a leaf)."""
    LEAF_MODULES.append(cls)
    return cls


def fx_wrap(fn: F) -> F:
    """Marks a function that symbolic tracing keeps as one call: ``torch.fx.wrap`` in its module."""
    exec(_WRAP, vars(sys.modules[fn.__module__]), dict(wrap=torch.fx.wrap, name=fn.__name__))
    AUTOWRAP_FUNCTIONS.append(fn)
    return fn
