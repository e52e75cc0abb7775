"""Serves ``mmcv._ext`` from ``inline_dense/ops/ext.py`` when mmcv has no compiled extension.

mmcv-lite ships ``mmcv.ops`` without the compiled ``mmcv._ext`` those modules import, so stock
``from mmdet.apis import DetInferencer`` fails with it. This module puts a finder at the END of
``sys.meta_path`` that answers for the one name ``mmcv._ext``: a compiled extension, when
installed, is found by the regular path finder first and used unchanged.

It is imported at interpreter start by ``inline_dense_mmcv_hook.pth`` (installed next to the
package by ``pip install .`` and by the editable install), and by ``import inline_dense.openmmlab``.
It imports only the standard library: it runs in every Python started in the environment.
Set ``INLINE_DENSE_MMCV_EXT=0`` to turn it off.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

TARGET = 'mmcv._ext'


class MmcvExtFinder(importlib.abc.MetaPathFinder):
    """Finds ``mmcv._ext`` as inline_dense's stand-in; no other name."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != TARGET or os.environ.get('INLINE_DENSE_MMCV_EXT', '1') == '0':
            return None
        package = importlib.util.find_spec('inline_dense')
        if package is None or not package.submodule_search_locations:
            return None
        for folder in package.submodule_search_locations:
            location = os.path.join(folder, 'ops', 'ext.py')
            if os.path.isfile(location):
                return importlib.util.spec_from_file_location(TARGET, location)
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


PTH_NAME = 'inline_dense_mmcv_hook.pth'


def install_pth(site_packages: str = '') -> str:
    """Writes the .pth file into ``site_packages`` (default: this environment's); returns its path.

    ``pip install .`` puts it there itself; an editable install (``pip install -e .``) does not,
    so tools/setup_env.sh calls this.
    """
    import sysconfig
    folder = site_packages or sysconfig.get_path('purelib')
    source = os.path.join(os.path.dirname(os.path.abspath(__file__)), PTH_NAME)
    with open(source, encoding='utf-8') as f:
        text = f.read()
    path = os.path.join(folder, PTH_NAME)
    with open(path + '.tmp', 'w', encoding='utf-8') as f:
        f.write(text)
    os.replace(path + '.tmp', path)
    return path


def describe() -> str:
    """Where ``mmcv._ext`` comes from in this interpreter, in one line."""
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
    if sys.argv[1:] == ['--install']:
        print(f'wrote {install_pth()}')
    elif sys.argv[1:]:
        sys.exit('usage: python -m inline_dense_mmcv_hook [--install]')
    print(f'mmcv._ext: {describe()}')
