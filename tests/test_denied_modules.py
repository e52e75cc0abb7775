"""The restricted unpickler refuses a pickle that names any module of ``DENIED_MODULES``, whichever
opcode names it (protocol 0-3 ``GLOBAL``, protocol 4+ ``STACK_GLOBAL``), and whether the pickle
names the module or one of its submodules: checked with a crafted pickle per module, not by
reading the list back."""
import pickle
import struct

import pytest

from inline_dense.checkpoint import safe_unpickle
from inline_dense.checkpoint.pickle_policy import DENIED_MODULES, PickledObject, RefusedPickle

NAME = 'not_on_any_allow_list'
# The usual code-execution gadgets' modules: refused even if someone shortens DENIED_MODULES.
GADGET_MODULES = {'os', 'posix', 'nt', 'subprocess', 'builtins', 'sys', 'importlib', 'pickle', 'ctypes',
                  'socket', 'runpy', 'shutil', 'marshal', 'types', 'operator', 'functools', 'codecs'}


def global_pickle(module: str, name: str) -> bytes:
    """Protocol 2: ``GLOBAL module name``, then STOP."""
    return b'\x80\x02c' + f'{module}\n{name}\n'.encode() + b'.'


def stack_global_pickle(module: str, name: str) -> bytes:
    """Protocol 4: the two names as SHORT_BINUNICODE, ``STACK_GLOBAL``, then STOP."""
    def text(s: str) -> bytes:
        data = s.encode()
        return b'\x8c' + struct.pack('<B', len(data)) + data
    return b'\x80\x04' + text(module) + text(name) + b'\x93.'


CRAFTED = {'GLOBAL': global_pickle, 'STACK_GLOBAL': stack_global_pickle}


@pytest.mark.parametrize('opcode', sorted(CRAFTED))
def test_every_denied_module_is_refused(opcode):
    craft = CRAFTED[opcode]
    accepted = []
    for module in sorted(DENIED_MODULES | GADGET_MODULES):
        for named in (module, f'{module}.sub'):
            try:
                safe_unpickle.loads(craft(named, NAME))
            except RefusedPickle as err:
                assert 'not on the allow-list' in str(err), (named, str(err))
            else:
                accepted.append(named)
    assert accepted == [], f'{opcode} pickles naming these were not refused: {accepted}'


@pytest.mark.parametrize('opcode', sorted(CRAFTED))
def test_a_module_outside_the_list_becomes_inert_data(opcode):
    """The same crafted pickle naming a class of an unknown package is read, as a placeholder:
    the refusals above come from the list, not from the crafting."""
    obj = safe_unpickle.loads(CRAFTED[opcode]('some_research_package.config', 'CfgNode'))
    assert isinstance(obj, type) and issubclass(obj, PickledObject)
    assert obj.pickle_name == 'some_research_package.config.CfgNode'


def test_crafted_pickles_are_what_pickle_itself_reads():
    """The crafted bytes name what they claim: pickle's own loader resolves them to the real thing."""
    assert pickle.loads(global_pickle('collections', 'OrderedDict')).__name__ == 'OrderedDict'
    assert pickle.loads(stack_global_pickle('collections', 'OrderedDict')).__name__ == 'OrderedDict'
