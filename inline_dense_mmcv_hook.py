"""Serves ``mmcv._ext`` from ``inline_dense/ops/ext.py`` when mmcv has no compiled extension.

mmcv-lite ships ``mmcv.ops`` without the compiled ``mmcv._ext`` those modules import, so stock
``from mmdet.apis import DetInferencer`` fails with it. This module puts a finder at the END of
``sys.meta_path`` that answers for the one name ``mmcv._ext`` with the module
``inline_dense.ops.ext`` itself (``mmcv._ext is inline_dense.ops.ext``): a compiled extension,
when installed, is found by the regular path finder first and used unchanged.

It is imported at interpreter start by ``inline_dense_mmcv_hook.pth`` (installed next to the
package by ``pip install .`` and by the editable install), and by ``import inline_dense.openmmlab``.
It runs in every Python started in the environment (pip, DataLoader workers, subprocesses), so at
start it imports nothing beyond what the interpreter has loaded already (``os``, ``sys``): the finder
and the loader are plain classes with the methods the import system calls (no ``importlib.abc``,
which pulls in ``importlib.resources`` and ``typing``), and ``importlib.util`` / ``importlib.machinery``
are imported only when ``mmcv._ext`` is looked up. Set ``INLINE_DENSE_MMCV_EXT=0`` to turn it off.
"""
import os
import sys

TARGET = 'mmcv._ext'
STAND_IN = 'inline_dense.ops.ext'


class SameModuleLoader:
    """An ``importlib.abc.Loader`` (by its methods) that answers ``mmcv._ext`` with the module object
    ``inline_dense.ops.ext`` itself (one identity: ``mmcv._ext is inline_dense.ops.ext``), so the ops'
    call counts and settings are shared."""

    def create_module(self, spec):  # noqa: ARG002
        import importlib
        return importlib.import_module(STAND_IN)

    def exec_module(self, module):
        pass  # imported (and executed) once, under its own name


class MmcvExtFinder:
    """An ``importlib.abc.MetaPathFinder`` (by its method) that finds ``mmcv._ext`` as inline_dense's
    stand-in; no other name."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ARG002
        if fullname != TARGET or os.environ.get('INLINE_DENSE_MMCV_EXT', '1') == '0':
            return None
        import importlib.util
        package = importlib.util.find_spec('inline_dense')
        if package is None or not package.submodule_search_locations:
            return None
        for folder in package.submodule_search_locations:
            location = os.path.join(folder, 'ops', 'ext.py')
            if os.path.isfile(location):
                return importlib.util.spec_from_file_location(TARGET, location, loader=SameModuleLoader())
        return None

    def __repr__(self):
        return f'<{type(self).__name__}: serves {TARGET} from inline_dense/ops/ext.py>'


def install() -> MmcvExtFinder:
    """Appends the finder to ``sys.meta_path`` once; returns the installed instance."""
    for finder in sys.meta_path:
        if isinstance(finder, MmcvExtFinder):
            return finder
    finder = MmcvExtFinder()
    sys.meta_path.append(finder)
    return finder


def describe() -> str:
    """Where ``mmcv._ext`` comes from in this interpreter, in one line."""
    import importlib.machinery
    import importlib.util
    spec = importlib.util.find_spec('mmcv')
    if spec is None:
        return 'mmcv is not installed'
    ext = importlib.machinery.PathFinder.find_spec(TARGET, list(spec.submodule_search_locations or []))
    if ext is not None:
        return f"mmcv's compiled extension: {ext.origin}"
    served = install().find_spec(TARGET)
    if served is None:
        return 'no mmcv._ext: no compiled ops, and the stand-in is off (INLINE_DENSE_MMCV_EXT=0) or missing'
    return f'inline_dense stand-in (mmcv-lite, ops from torchvision): {served.origin}'


if __name__ == '__main__':
    if sys.argv[1:]:
        sys.exit('usage: python -m inline_dense_mmcv_hook  (says which mmcv._ext this environment uses)')
    print(f'mmcv._ext: {describe()}')
