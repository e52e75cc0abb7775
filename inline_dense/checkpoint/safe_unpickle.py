"""Read research checkpoints that pickle objects besides tensors, without running their code.

The authors' checkpoints (and most research code's) hold, next to the weights, a yacs
``CfgNode``, an ``argparse.Namespace``, optimizer / scheduler / AMP state. ``torch.load(...,
weights_only=True)`` refuses them; ``weights_only=False`` would run whatever the pickle names.
:func:`load` reads them with a restricted pure-Python unpickler (``pickle._Unpickler``, whose
opcodes can be overridden one by one) plugged into ``torch.load`` through ``pickle_module=``,
so torch still reads the tensors' storages from the file.

Contract (what a pickle may do here):

- A global (GLOBAL / STACK_GLOBAL / INST / EXT*) resolves to a *real* object only if it is on
  the allow-list: torch's own ``weights_only`` allow-list (tensor/storage rebuild functions,
  dtypes, ``OrderedDict`` ...), numpy's arrays and scalars, the globals an adapter added
  (``pickle_policy.add_allowed_globals``: mmengine's types, from ``inline_dense.openmmlab.mmengine_types``),
  plain builtin containers and ``copyreg._reconstructor`` (replaced by an inert stand-in). Nothing is ever imported.
- Any global of a module that can run code or touch the system (``os``, ``posix``, ``subprocess``,
  ``builtins``, ``sys``, ``importlib``, ``pickle``, ``ctypes``, ``socket`` ... see
  ``pickle_policy.DENIED_MODULES``) is refused at once, as is any global that is, in a module already imported
  here, something other than a class (``torch.load``, ``numpy.load``, a function).
- Every other global becomes an inert *placeholder class* (a subclass of :class:`PickledObject`).
  Constructing it (NEWOBJ, INST/OBJ, ``copyreg._reconstructor``, or REDUCE of a class) records the
  arguments; BUILD records the state; SETITEMS/APPENDS store items. No code of the file runs.
  Calling (REDUCE) an unknown global from a module not imported here is allowed only when its
  name is a class name (CamelCase); a lower-case name (a function, by convention) is refused.
- REDUCE / NEWOBJ / BUILD on a real object are allowed exactly as ``weights_only`` allows them.
- APPEND(S) only into a ``list``, SETITEM(S) only into a ``dict`` / ``OrderedDict`` / ``Counter``,
  ADDITEMS only into a ``set`` (or, for each, a placeholder, which stores the items as data):
  the opcodes never call a method of any other object.

A malformed pickle (an opcode without its operands, an unknown opcode, arguments an allowed
class does not take) raises :class:`MalformedPickle`, one that ends early ``EOFError``.

Refusals raise :class:`RefusedPickle` (an ``UnpicklingError``) before anything is called.
"""
import _compat_pickle
import io
import pickle
import struct
import sys
import zipfile
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from .pickle_policy import DENIED_MODULES, PickledObject, RefusedPickle, allowed_globals, is_denied

# Exact types the container opcodes may fill (subclasses could run code in their methods).
LIST_TYPES = (list,)
DICT_TYPES = (dict, OrderedDict, Counter)
SET_TYPES = (set,)


class MalformedPickle(pickle.UnpicklingError):
    """The pickle's opcodes do not form a valid pickle (not a refusal: nothing disallowed was named)."""

def _lookup_loaded(module: str, name: str) -> Any:
    """The object ``module.name`` if that module is imported already (no import, no
    ``__getattr__``), ``None`` if unknown here."""
    obj: Any = sys.modules.get(module)
    for part in name.split('.'):
        if obj is None:
            return None
        try:
            obj = vars(obj).get(part)
        except TypeError:
            return None
    return obj


class RestrictedUnpickler(pickle._Unpickler):
    """See the module docstring. ``placeholders`` collects the names turned into data."""

    allowed: ClassVar[dict[str, Any]] = {}
    placeholders: set[str]
    # set by pickle's pure-Python unpickler at run time; declared for the type checker (typeshed omits them)
    stack: list[Any]
    append: Callable[[Any], None]
    pop_mark: Callable[[], list[Any]]
    proto: int
    fix_imports: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.placeholders = set()
        self._classes: dict[str, type] = {}
        self._callable_ids = {id(v) for v in self.allowed.values()}

    # ------------------------------------------------------------------ globals
    def find_class(self, module: str, name: str) -> Any:
        if self.proto < 3 and self.fix_imports:
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        full = f'{module}.{name}'
        if full in self.allowed:
            return self.allowed[full]
        if is_denied(module):
            raise RefusedPickle(f'it names {full}, which can run code or reach the system and is not '
                                f'on the allow-list')
        real = _lookup_loaded(module, name)
        if real is not None and not isinstance(real, type):
            raise RefusedPickle(f'it names {full}, a {type(real).__name__} (not a class) outside the allow-list')
        if full not in self._classes:
            self._classes[full] = type(name.rsplit('.', 1)[-1], (PickledObject,),
                                       {'pickle_name': full, 'pickle_verified': real is not None,
                                        '__module__': __name__, '__qualname__': f'PickledObject[{full}]'})
        self.placeholders.add(full)
        return self._classes[full]

    # ------------------------------------------------------------------ calls
    def _is_placeholder(self, obj: Any) -> bool:
        return isinstance(obj, type) and issubclass(obj, PickledObject)

    def _call(self, func: Any, args: tuple, how: str) -> Any:
        if self._is_placeholder(func):
            last = func.pickle_name.rsplit('.', 1)[-1]
            if how == 'REDUCE' and not func.pickle_verified and not last[:1].isupper():
                raise RefusedPickle(f'it calls {func.pickle_name}, which is not on the allow-list (a '
                                    f'function, by its name) and whose module is not loaded here')
            return func(*args)
        if id(func) in self._callable_ids and callable(func):
            try:
                return func(*args)
            except RefusedPickle:
                raise
            except pickle.UnpicklingError as exc:  # e.g. the getattr stand-in refusing
                raise RefusedPickle(str(exc)) from exc
            except (TypeError, ValueError, IndexError, KeyError, RuntimeError) as exc:  # the data's arguments
                raise MalformedPickle(f'{how} of {getattr(func, "__qualname__", func)!r} with the pickled '
                                      f'arguments failed ({type(exc).__name__}: {str(exc)[:120]})') from exc
        raise RefusedPickle(f'it calls {func!r} ({how}), which is not on the allow-list')

    def _new(self, cls: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        if self._is_placeholder(cls):
            return cls(*args, **kwargs)
        if isinstance(cls, type) and id(cls) in self._callable_ids:
            if cls is torch.nn.Parameter:
                return torch.nn.Parameter(*args, **kwargs)
            return cls.__new__(cls, *args, **kwargs)
        raise RefusedPickle(f'it constructs {cls!r} (NEWOBJ), which is not an allow-listed class')

    def load_reduce(self) -> None:
        args = self.stack.pop()
        self.stack[-1] = self._call(self.stack[-1], args, 'REDUCE')

    def load_newobj(self) -> None:
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, {}))

    def load_newobj_ex(self) -> None:
        kwargs = self.stack.pop()
        args = self.stack.pop()
        cls = self.stack.pop()
        self.append(self._new(cls, args, kwargs))

    def _instantiate(self, klass: Any, args: list[Any]) -> None:  # INST / OBJ
        self.append(self._call(klass, tuple(args), 'INST'))

    def load_build(self) -> None:
        state = self.stack.pop()
        inst = self.stack[-1]
        kind = type(inst)
        if isinstance(inst, PickledObject):
            inst.__setstate__(state)
        elif kind is torch.Tensor:  # legacy tensors, as weights_only does
            inst.set_(*state)
        elif kind is torch.nn.Parameter:
            inst.__setstate__(state)
        elif kind is OrderedDict:  # a state dict's _metadata
            if not isinstance(state, dict):
                raise RefusedPickle('BUILD of an OrderedDict with a non-dict state')
            inst.__dict__.update(state)
        elif id(kind) in self._callable_ids:  # an allow-listed class (numpy arrays, HistoryBuffer, ...)
            if hasattr(inst, '__setstate__'):
                inst.__setstate__(state)
                return
            slots = None
            if isinstance(state, tuple) and len(state) == 2:
                state, slots = state
            inst.__dict__.update(state or {})
            for k, v in (slots or {}).items():
                setattr(inst, k, v)
        else:
            raise RefusedPickle(f'it sets the state of {inst!r:.80} (BUILD), which is not allowed')

    # ------------------------------------------------------------------ containers
    def _target(self, kinds: tuple[type, ...], opcode: str) -> Any:
        target = self.stack[-1]
        if type(target) in kinds or isinstance(target, PickledObject):
            return target
        raise RefusedPickle(f'it applies {opcode} to {type(target).__name__!r}; only '
                            f'{"/".join(k.__name__ for k in kinds)} (or data objects) may be filled')

    def load_append(self) -> None:
        item = self.stack.pop()
        self._target(LIST_TYPES, 'APPEND').append(item)

    def load_appends(self) -> None:
        items = self.pop_mark()
        self._target(LIST_TYPES, 'APPENDS').extend(items)

    def load_setitem(self) -> None:
        value = self.stack.pop()
        key = self.stack.pop()
        self._target(DICT_TYPES, 'SETITEM')[key] = value  # exact types: their own, builtin __setitem__

    def load_setitems(self) -> None:
        items = self.pop_mark()
        target = self._target(DICT_TYPES, 'SETITEMS')
        if len(items) % 2:
            raise MalformedPickle('SETITEMS with a key and no value')
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]

    def load_additems(self) -> None:
        items = self.pop_mark()
        target = self._target(SET_TYPES, 'ADDITEMS')
        for item in items:
            target.add(item)

    def load(self) -> Any:
        try:
            return super().load()
        except pickle.UnpicklingError:
            raise
        except (IndexError, KeyError, struct.error, UnicodeDecodeError, ValueError) as exc:
            # an opcode without its operands (IndexError: the stack is empty), an unknown opcode (KeyError)
            raise MalformedPickle(f'the pickle is malformed ({type(exc).__name__}: {str(exc)[:120]})') from exc

    dispatch: ClassVar[dict[int, Callable[..., None]]] = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.REDUCE[0]] = load_reduce
    dispatch[pickle.NEWOBJ[0]] = load_newobj
    dispatch[pickle.NEWOBJ_EX[0]] = load_newobj_ex
    dispatch[pickle.BUILD[0]] = load_build
    dispatch[pickle.APPEND[0]] = load_append
    dispatch[pickle.APPENDS[0]] = load_appends
    dispatch[pickle.SETITEM[0]] = load_setitem
    dispatch[pickle.SETITEMS[0]] = load_setitems
    dispatch[pickle.ADDITEMS[0]] = load_additems


def _pickle_module(report: set[str]) -> Any:
    """A module-like object for ``torch.load(pickle_module=...)`` whose Unpickler is restricted
    and adds the placeholder names it creates to ``report``."""
    allowed = allowed_globals()

    class Unpickler(RestrictedUnpickler):
        def load(self) -> Any:
            try:
                return super().load()
            finally:
                report.update(self.placeholders)
    Unpickler.allowed = allowed

    def load(file: Any, **kwargs: Any) -> Any:
        return Unpickler(file, **kwargs).load()

    class Module:
        __name__ = 'inline_dense_restricted_pickle'
        UnpicklingError = pickle.UnpicklingError
    module = Module()
    module.Unpickler = Unpickler  # type: ignore[attr-defined]
    module.load = load  # type: ignore[attr-defined]
    return module


def refuse_torchscript(path: str) -> None:
    """Raises :class:`RefusedPickle` for a TorchScript archive, which ``torch.load`` (even with
    ``weights_only=True``) would hand to ``torch.jit.load``."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            if any(n.endswith('constants.pkl') for n in zf.namelist()):
                raise RefusedPickle('it is a TorchScript archive, not a checkpoint (load it with torch.jit.load '
                                    'if you trust it)')


def loads(data: bytes) -> Any:
    """Unpickles a plain pickle (no tensor storages) under the same contract; for tests and tools."""
    return _pickle_module(set()).Unpickler(io.BytesIO(data)).load()


def load(path: str, map_location: Any = 'cpu') -> tuple[Any, list[str]]:
    """Reads the checkpoint at ``path`` under the contract above.

    Returns (object, sorted names of the classes kept as :class:`PickledObject` data).
    Raises :class:`RefusedPickle` for a pickle outside the contract (nothing of it ran),
    ``RefusedPickle`` too for a TorchScript archive (``torch.load`` would hand it to
    ``torch.jit.load``), and torch's own errors for an unreadable file.
    """
    refuse_torchscript(path)
    report: set[str] = set()
    obj = torch.load(path, map_location=map_location, weights_only=False, pickle_module=_pickle_module(report))
    return obj, sorted(report)


__all__ = ['DENIED_MODULES', 'MalformedPickle', 'PickledObject', 'RefusedPickle', 'RestrictedUnpickler',
           'allowed_globals', 'load', 'loads']
