"""The restricted unpickler, hardened (issue 17): container opcodes fill only plain containers,
globals that read files or the environment when constructed are refused (whoever put them on
torch's safe list), malformed files give ``CheckpointError`` with the right reason, the allow-list
fails closed, and a bug in the loader is not reported as a damaged file."""
import pickle
import traceback

import pytest
import torch

import inline_dense.openmmlab  # noqa: F401  (torch.distributed's and mmengine's safe globals are registered by now)
from inline_dense.checkpoint import CheckpointError, read_checkpoint, safe_unpickle
from inline_dense.checkpoint.safe_unpickle import MalformedPickle, RefusedPickle

P2 = b'\x80\x02'


@pytest.mark.parametrize('data, opcode', [
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
    with pytest.raises(RefusedPickle, match='traceback.FrameSummary'):
        safe_unpickle.loads(frame_summary_pickle(str(secret)))
    path = tmp_path / 'frame.pth'
    torch.save({'state_dict': {'w': torch.ones(1)}, 'trace': traceback.FrameSummary(str(secret), 1, 'x')}, path)
    with pytest.raises(CheckpointError, match='refusing to load.*traceback.FrameSummary'):
        read_checkpoint(str(path))


@pytest.mark.parametrize('data, reason', [
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
    assert 'malformed' in str(info.value) and 'truncated' not in str(info.value)


def test_the_allow_list_fails_closed(monkeypatch, tmp_path):
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
