"""The module paths under ``inline_dense.models`` that moved, kept importable for one release.

The bricks moved to :mod:`inline_dense.layers`, each family's model to
``inline_dense.families.<name>``. ``import inline_dense.models.inline_swin`` (or ``from ... import``)
still works: a finder on ``sys.meta_path`` answers the old name with a thin module that warns once
(``DeprecationWarning``, naming the new place) and hands out the new modules' names. No file stands
at the old paths: git then sees the moves as renames, and edits made to the old files elsewhere
follow them.

The public names stay where they were: ``from inline_dense.models import InLineSwin`` warns nothing.
"""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from collections.abc import Sequence
from typing import Any

PACKAGE = 'inline_dense.models'

# old module (under inline_dense.models) -> the modules that now hold its names, searched in order
MOVED: dict[str, tuple[str, ...]] = {
    'inline_attention': ('inline_dense.layers.inline_attention',),
    'tensor_utils': ('inline_dense.layers.tensor_utils',),
    'weight_init': ('inline_dense.layers.weight_init',),
    'arch': ('inline_dense.layers.arch',),
    'backbone_settings': ('inline_dense.layers.settings',),
    'backbone_base': ('inline_dense.layers.backbone', 'inline_dense.layers.padding'),
    'layers': ('inline_dense.layers.block', 'inline_dense.layers.padding', 'inline_dense.layers.windows'),
    'inline_swin': ('inline_dense.families.swin.model', 'inline_dense.layers.padding'),
    'window_attention': ('inline_dense.families.swin.window_attention',),
    'inline_pvt': ('inline_dense.families.pvt.model', 'inline_dense.layers.position', 'inline_dense.layers.padding'),
    'sr_attention': ('inline_dense.families.pvt.sr_attention',),
    'inline_cswin': ('inline_dense.families.cswin.model', 'inline_dense.layers.padding'),
    'cswin_attention': ('inline_dense.families.cswin.stripe_attention',),
}


def _forwarding(old: str, targets: Sequence[str]) -> tuple[Any, Any]:
    """The old module's ``__getattr__`` and ``__dir__`` (PEP 562): names from ``targets``."""
    modules = [importlib.import_module(t) for t in targets]

    def getattr_(name: str) -> Any:
        for module in modules:
            if hasattr(module, name):
                return getattr(module, name)
        raise AttributeError(f'module {old!r} (moved to {", ".join(targets)}) has no attribute {name!r}')

    def dir_() -> list[str]:
        return sorted({n for module in modules for n in dir(module) if not n.startswith('__')})
    return getattr_, dir_


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old names of :data:`MOVED`; loads each as a module that forwards to the new ones."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,  # noqa: ARG002
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:  # noqa: ARG002
        package, _, name = fullname.rpartition('.')
        if package != PACKAGE or name not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:  # noqa: ARG002
        return None  # the default module

    def exec_module(self, module: types.ModuleType) -> None:
        targets = MOVED[module.__name__.rpartition('.')[2]]
        warnings.warn(f'{module.__name__} moved to {" and ".join(targets)}; import from there (or the public '
                      f'names from {PACKAGE}). The old path goes in the next release.', DeprecationWarning,
                      stacklevel=2)
        module.__getattr__, module.__dir__ = _forwarding(module.__name__, targets)  # type: ignore[method-assign]


def install() -> None:
    """Puts the finder on ``sys.meta_path`` (once; after the path finders, which find no file there)."""
    if not any(type(f).__name__ == MovedModuleFinder.__name__ and type(f).__module__ == __name__
               for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
