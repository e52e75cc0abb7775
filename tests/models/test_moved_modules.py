"""The module paths that moved out of ``inline_dense.models`` still import for one release, with a
DeprecationWarning naming the new place; the public names import from ``inline_dense.models``
without one."""
import importlib
import subprocess
import sys
import warnings

import pytest

from inline_dense.models.moved import MOVED


def test_the_public_names_import_without_a_warning():
    done = subprocess.run([sys.executable, '-W', 'error', '-c',
                           'from inline_dense.models import InLineSwin, InLinePVT, InLineCSwin, InLineAttention'],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize('old', sorted(MOVED))
def test_an_old_path_warns_and_gives_the_same_objects(old):
    name = f'inline_dense.models.{old}'
    sys.modules.pop(name, None)
    with pytest.warns(DeprecationWarning, match=rf'{name} moved to {MOVED[old][0]}') as caught:
        __import__(name)  # as an import statement does: the warning points at the importing line
    module = sys.modules[name]
    assert caught[0].filename == __file__
    new = importlib.import_module(MOVED[old][0])
    public = [n for n, v in vars(new).items()
              if not n.startswith('_') and getattr(v, '__module__', None) == new.__name__]
    assert public
    assert all(getattr(module, n) is getattr(new, n) for n in public)
    with pytest.raises(AttributeError, match='moved to'):
        module.no_such_name  # noqa: B018


def test_a_name_that_never_existed_still_fails():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module('inline_dense.models.no_such_module')
