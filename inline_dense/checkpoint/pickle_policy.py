"""What the restricted unpickler (``safe_unpickle``) allows: the allow-list, the denied modules,
and the inert :class:`PickledObject` that stands in for objects of any other class."""
import builtins
import pickle
from collections.abc import Iterable
from typing import Any

import torch

from .numpy_types import numpy_safe_globals

# Modules (and their submodules) whose globals are never resolved, not even to a placeholder.
DENIED_MODULES = frozenset({
    'os', 'posix', 'nt', 'posixpath', 'ntpath', 'subprocess', '_posixsubprocess', 'sys', 'builtins',
    '__builtin__', 'shutil', 'importlib', 'imp', 'runpy', 'pickle', '_pickle', 'cPickle', 'copyreg',
    'copy_reg', 'marshal', 'types', 'ctypes', '_ctypes', 'code', 'codeop', 'pty', 'socket', '_socket',
    'ssl', 'http', 'urllib', 'urllib2', 'ftplib', 'smtplib', 'telnetlib', 'webbrowser', 'multiprocessing',
    'concurrent', 'threading', '_thread', 'asyncio', 'signal', 'platform', 'pdb', 'bdb', 'timeit',
    'trace', 'profile', 'cProfile', 'inspect', 'gc', 'operator', '_operator', 'functools', '_functools',
    'io', '_io', 'codecs', '_codecs', 'tempfile', 'glob', 'zipimport', 'pkgutil', 'site', 'sysconfig',
    'distutils', 'setuptools', 'pip', 'shelve', 'dbm', 'sqlite3', 'linecache', 'ast', 'dis',
    'compileall', 'py_compile', 'zipfile', 'tarfile', 'commands', 'popen2', 'tkinter', 'pydoc',
    'dill', 'cloudpickle', 'joblib',
    # constructing these reads files or the environment: traceback.FrameSummary reads a source line
    # (linecache); DeviceMesh / DTensor join process groups; the compilers and the hub run or fetch code
    'traceback', 'logging', 'warnings', 'tokenize', 'torch.distributed', 'torch._dynamo', 'torch._inductor',
    'torch.jit', 'torch.hub', 'torch.package', 'torch.utils.cpp_extension', 'torch.cuda', 'torch.multiprocessing'})
# (object, 'module.Name') entries another library's adapter adds (:func:`add_allowed_globals`): the
# OpenMMLab adapter adds mmengine's ``HistoryBuffer``, which this torch-only package does not import.
_ADDED: dict[str, Any] = {}
# Safe builtins beyond torch's list: containers and scalars (calling them only builds data).
_SAFE_BUILTINS = ('set', 'frozenset', 'complex', 'slice', 'bytearray', 'range', 'object', 'dict', 'list',
                  'tuple', 'int', 'float', 'str', 'bool', 'bytes')


class RefusedPickle(pickle.UnpicklingError):
    """The pickle names or calls something outside the allow-list; nothing was called."""


class PickledObject(dict):
    """Inert stand-in for an object of a class that is not on the allow-list.

    ``pickle_name`` (class attribute) is the pickled class (``'yacs.config.CfgNode'``).
    Per instance: ``pickle_args`` / ``pickle_kwargs`` (constructor arguments as pickled),
    ``pickle_state`` (what BUILD passed, e.g. the instance ``__dict__``), ``pickle_items``
    (APPENDS / ADDITEMS items); dict items (a ``dict`` subclass's content) are the dict itself.
    Attribute access reads the recorded state (``ns.lr`` for a pickled ``Namespace(lr=...)``).
    """
    pickle_name = '?'
    pickle_verified = False  # True: the name is a class in a module imported here

    def __new__(cls, *args: Any, **kwargs: Any) -> 'PickledObject':
        self = dict.__new__(cls)
        self.__dict__.update(pickle_args=args, pickle_kwargs=kwargs, pickle_state=None, pickle_items=[])
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # never fills the dict from arguments
        pass

    def __setstate__(self, state: Any) -> None:
        self.__dict__['pickle_state'] = state

    def append(self, item: Any) -> None:
        self.__dict__['pickle_items'].append(item)

    def extend(self, items: Any) -> None:
        self.__dict__['pickle_items'].extend(items)

    def add(self, item: Any) -> None:
        self.__dict__['pickle_items'].append(item)

    def __getattr__(self, name: str) -> Any:
        if not name.startswith('__'):
            state = self.__dict__.get('pickle_state')
            if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
                state = {**(state[0] or {}), **(state[1] or {})}
            if isinstance(state, dict) and name in state:
                return state[name]
        raise AttributeError(f'{self.pickle_name} (unpickled as inert data) has no recorded attribute {name!r}')

    def __repr__(self) -> str:
        parts = [f'args={self.pickle_args!r}'] if self.pickle_args else []
        if self.pickle_state is not None:
            parts.append(f'state={self.pickle_state!r}')
        if len(self):
            parts.append(f'items={dict(self)!r}')
        return f'<{self.pickle_name} as data: {", ".join(parts)[:300]}>'


def _reconstructor_stand_in(cls: Any, base: Any, state: Any) -> Any:  # noqa: ARG001
    """``copyreg._reconstructor`` (protocol 0/1 objects) for placeholder classes only."""
    if isinstance(cls, type) and issubclass(cls, PickledObject) and base in (object, dict, list):
        return cls()
    raise RefusedPickle(f'refusing copyreg._reconstructor({cls!r}, {base!r}): only allowed for data objects')


def is_denied(module: str) -> bool:
    """Whether ``module`` or a package above it is in :data:`DENIED_MODULES`."""
    parts = module.split('.')
    return any('.'.join(parts[:i]) in DENIED_MODULES for i in range(1, len(parts) + 1))


def add_allowed_globals(entries: Iterable[tuple[Any, str]]) -> None:
    """Adds ``(object, 'module.Name')`` entries to :func:`allowed_globals` (idempotent); the
    OpenMMLab adapter adds mmengine's checkpoint types (``inline_dense.openmmlab.mmengine_types``)."""
    _ADDED.update({name: obj for obj, name in entries})


def allowed_globals() -> dict[str, Any]:
    """'module.name' -> object: torch's own ``weights_only`` list, the entries an adapter added
    (:func:`add_allowed_globals`: mmengine's checkpoint types), numpy's arrays and scalars
    (``numpy_types``), safe builtins.

    Globals other libraries add with ``torch.serialization.add_safe_globals`` are *not* taken over
    (torch.distributed adds ``traceback.FrameSummary``, which reads files): a class of theirs
    becomes inert data like any other. Without torch's list (a torch whose private API moved) this
    raises rather than guessing: the allow-list fails closed.
    """
    try:
        from torch import _weights_only_unpickler as wo
        torch_allowed = wo._get_allowed_globals()
    except (ImportError, AttributeError) as exc:
        raise RefusedPickle(f'torch {torch.__version__} has no weights_only allow-list where inline_dense reads it '
                            f'(torch._weights_only_unpickler._get_allowed_globals), so nothing beyond tensors can be '
                            f'read safely; install the torch of requirements/lock.txt') from exc
    out: dict[str, Any] = dict(torch_allowed)  # vetted by torch (e.g. _codecs.encode only builds bytes)
    out.update(_ADDED)
    out.update({name: obj for obj, name in numpy_safe_globals()})
    out.update({f'builtins.{n}': getattr(builtins, n) for n in _SAFE_BUILTINS})
    out['copyreg._reconstructor'] = _reconstructor_stand_in
    return out
