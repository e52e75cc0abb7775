"""The restricted unpickler: a pickle naming any module of ``DENIED_MODULES`` is refused whichever
opcode names it (protocol 0-3 ``GLOBAL``, protocol 4+ ``STACK_GLOBAL``) and whether it names the
module or a submodule (checked with a crafted pickle per module, not by reading the list back);
container opcodes fill only plain containers; globals that read files or the environment when
constructed are refused (whoever put them on torch's safe list); malformed files give
``CheckpointError`` with the right reason; the allow-list fails closed; and a bug in the loader is
not reported as a damaged file. Whole malicious checkpoints: tests/checkpoint/test_checkpoint_safe_load.py."""
import pickle
import struct
import traceback

import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (torch.distributed's and mmengine's safe globals are registered by now)
from inline_dense.checkpoint import CheckpointError, read_checkpoint, safe_unpickle
from inline_dense.checkpoint.pickle_policy import DENIED_MODULES, PickledObject
from inline_dense.checkpoint.safe_unpickle import MalformedPickle, RefusedPickle

P2 = b'\x80\x02'


@pytest.mark.parametrize(('data', 'opcode'), [
    (P2 + b'}K\x01a.', 'APPEND'),                 # APPEND onto a dict
    (P2 + b')(K\x01e.', 'APPENDS'),               # APPENDS onto a tuple
    (P2 + b']K\x05aK\x00K\x07s.', 'SETITEM'),     # SETITEM onto a list: list[0] = 7
    (P2 + b'](K\x00K\x07u.', 'SETITEMS'),         # SETITEMS onto a list
    (b'\x80\x04](K\x01\x90.', 'ADDITEMS'),        # ADDITEMS onto a list
])
def test_container_opcodes_fill_only_plain_containers(data, opcode):
    with pytest.raises(RefusedPickle, match=f'it applies {opcode} to'):
        safe_unpickle.loads(data)


def test_container_opcodes_still_build_data():
    obj = {'a': [1, 2], 'b': {3}, 'c': __import__('collections').OrderedDict(x=1)}
    assert safe_unpickle.loads(pickle.dumps(obj, protocol=4)) == obj
    assert list(safe_unpickle.loads(pickle.dumps(obj, protocol=2))['c'].items()) == [('x', 1)]


def frame_summary_pickle(path):
    """A pickle that builds traceback.FrameSummary(path, 1, 'x'): its ``line`` reads the file."""
    return (P2 + b'ctraceback\nFrameSummary\n(X' + len(path).to_bytes(4, 'little') + path.encode()
            + b'K\x01X\x01\x00\x00\x00xtR.')


def test_frame_summary_is_refused_although_torch_lists_it(tmp_path):
    from torch import _weights_only_unpickler as wo
    assert 'traceback.FrameSummary' in wo._get_user_allowed_globals()  # torch.distributed registers it
    secret = tmp_path / 'secret.txt'
    secret.write_text('a line of a local file\n')
    with pytest.raises(RefusedPickle, match=r'traceback.FrameSummary'):
        safe_unpickle.loads(frame_summary_pickle(str(secret)))
    path = tmp_path / 'frame.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'trace': traceback.FrameSummary(str(secret), 1, 'x')}, path)
    with pytest.raises(CheckpointError, match=r'refusing to load.*traceback.FrameSummary'):
        read_checkpoint(str(path))


@pytest.mark.parametrize(('data', 'reason'), [
    (P2 + b'a.', 'IndexError'),                   # APPEND with an empty stack
    (P2 + b'\xff', 'KeyError'),                   # no such opcode
    (P2 + b'}q\x00(X', 'error'),                  # a string whose length was cut off
    (P2 + b'ctorch\nSize\nK\x01K\x02\x86R.', 'REDUCE'),  # an allowed class with arguments it does not take
])
def test_malformed_pickles_are_named_malformed(data, reason, tmp_path):
    with pytest.raises(MalformedPickle, match=reason):
        safe_unpickle.loads(data)
    path = tmp_path / 'bad.pth'
    path.write_bytes(data)
    with pytest.raises(CheckpointError, match='not a readable PyTorch checkpoint: its pickle is malformed'):
        read_checkpoint(str(path))


def test_a_malformed_zip_checkpoint_is_not_called_truncated(tmp_path):
    class BadSize:  # pickles as torch.Size(1, 2)
        def __reduce__(self):
            return torch.Size, (1, 2)
    path = tmp_path / 'bad.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'x': BadSize()}, path)
    with pytest.raises(CheckpointError) as info:
        read_checkpoint(str(path))
    assert 'malformed' in str(info.value)
    assert 'truncated' not in str(info.value)


def test_the_allow_list_fails_closed(monkeypatch):
    from torch import _weights_only_unpickler as wo
    monkeypatch.delattr(wo, '_get_allowed_globals')
    with pytest.raises(RefusedPickle, match='no weights_only allow-list'):
        safe_unpickle.loads(pickle.dumps({'a': 1}))


def test_a_loader_bug_is_not_reported_as_a_damaged_file(monkeypatch, tmp_path):
    path = tmp_path / 'c.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}}, path)

    def buggy(*args, **kwargs):
        raise TypeError('a bug in the loader')
    monkeypatch.setattr(safe_unpickle, 'load', buggy)
    with pytest.raises(TypeError, match='a bug in the loader'):
        read_checkpoint(str(path))


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
                assert 'not on the allow-list' in str(err), (named, str(err))  # noqa: PT017 (the loop lists what passed)
            else:
                accepted.append(named)
    assert accepted == [], f'{opcode} pickles naming these were not refused: {accepted}'


@pytest.mark.parametrize('opcode', sorted(CRAFTED))
def test_a_module_outside_the_list_becomes_inert_data(opcode):
    """The same crafted pickle naming a class of an unknown package is read, as a placeholder:
    the refusals above come from the list, not from the crafting."""
    obj = safe_unpickle.loads(CRAFTED[opcode]('some_research_package.config', 'CfgNode'))
    assert isinstance(obj, type)
    assert issubclass(obj, PickledObject)
    assert obj.pickle_name == 'some_research_package.config.CfgNode'


def test_crafted_pickles_are_what_pickle_itself_reads():
    """The crafted bytes name what they claim: pickle's own loader resolves them to the real thing."""
    assert pickle.loads(global_pickle('collections', 'OrderedDict')).__name__ == 'OrderedDict'
    assert pickle.loads(stack_global_pickle('collections', 'OrderedDict')).__name__ == 'OrderedDict'
