"""Atomic file writes: readers see the old content or the new one, never a part.

The data goes to a temporary file in the destination's directory, is flushed to disk, given
the mode an ordinary ``open(..., 'w')`` would give (``0o666`` less the umask; ``mkstemp``
alone gives ``0o600``) and renamed into place (``os.replace`` is atomic on POSIX). On any error
the temporary file is removed. A writer with checks of its own between the write and the rename
(the checkpoint cache, ``checkpoint.cache``) takes the two steps itself: :func:`temporary_path`,
then :func:`commit`. Used by the cache, ``checkpoint.saving``, the ONNX export and the training
checkpoints (``openmmlab.engine.checkpointing``), the benchmark's JSON and plot, get_flops' JSON and
the demo's picture.

One rule for every output path (:func:`output_target`): an existing path that is not a regular
file (a directory, a device such as ``/dev/null``, a FIFO, a socket) is refused with
:class:`OutputPathError`, since the rename would replace it. A symlink is written through: the
temporary file goes next to the link's final target, which is replaced; the link stays a link.
"""
import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Union

from .errors import CheckpointError

PathLike = Union[str, 'os.PathLike[str]']
TMP_PREFIX = '.tmp-'
_KINDS = ((stat.S_ISCHR, 'character device'), (stat.S_ISBLK, 'block device'), (stat.S_ISFIFO, 'FIFO (named pipe)'),
          (stat.S_ISSOCK, 'socket'))


class OutputPathError(CheckpointError):
    """An output path that cannot or must not be written (one line: what is wrong, what to do)."""


def output_target(dst: PathLike) -> str:
    """The file a write to ``dst`` replaces: ``dst`` itself, or for a symlink (a chain of them, or
    one whose target does not exist yet) its final target. Raises :class:`OutputPathError` when
    that exists and is not a regular file, or the link loops."""
    path = os.fspath(dst)
    target = os.path.realpath(path) if os.path.islink(path) else path
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target
    except OSError as exc:  # ELOOP, EACCES on a parent, ...
        raise OutputPathError(f'the output {path} cannot be inspected ({exc.strerror}); name another file.') from exc
    if stat.S_ISDIR(mode):
        raise OutputPathError(f'the output {path} is a directory; name a file in it, e.g. '
                              f'{os.path.join(path, "<name>")}.')
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), 'special file')
        via = f' (through the link to {target})' if target != path else ''
        raise OutputPathError(f'the output {path} is a {kind}{via}, not a regular file: writing would replace it. '
                              f'Name a regular file instead.')
    return target


def current_umask() -> int:
    """The process umask, read without changing it where ``/proc`` allows."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)  # no read-only API elsewhere: set and restore at once
    os.umask(mask)
    return mask


def fsync_dir(directory: PathLike) -> None:
    """Makes a rename in ``directory`` durable (a no-op where directories cannot be opened)."""
    with contextlib.suppress(OSError):
        fd = os.open(os.fspath(directory), os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def temporary_path(dst: PathLike) -> str:
    """A fresh temporary file name next to the file ``dst`` names (:func:`output_target`: through a
    symlink, next to its target), created empty, mode 0600."""
    dst = Path(output_target(dst))
    fd, tmp = tempfile.mkstemp(dir=str(dst.parent), prefix=f'{TMP_PREFIX}{dst.name}.', suffix='.part')
    os.close(fd)
    return tmp


def commit(tmp: PathLike, dst: PathLike) -> None:
    """fsyncs ``tmp``, gives it the umask's mode, renames it to ``dst`` and makes the rename
    durable. ``dst`` is checked again (:func:`output_target`); a symlink's target is replaced, not
    the link. ``tmp`` is removed on any error."""
    try:
        dst = output_target(dst)
        with open(tmp, 'rb+') as f:
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(Path(dst).parent)


@contextlib.contextmanager
def atomic_writer(dst: PathLike) -> Iterator[IO[bytes]]:
    """``with atomic_writer(path) as f: f.write(...)``: ``path`` appears, complete, when the block
    ends without an error; otherwise nothing changes."""
    tmp = temporary_path(dst)
    try:
        with open(tmp, 'wb') as f:
            yield f
            f.flush()
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    commit(tmp, dst)


def atomic_write_bytes(dst: PathLike, data: bytes) -> None:
    with atomic_writer(dst) as f:
        f.write(data)


def atomic_write_text(dst: PathLike, text: str) -> None:
    atomic_write_bytes(dst, text.encode())


def write_output(dst: PathLike, data: bytes | str) -> None:
    """A tool's output file (JSON, plot, picture): :func:`output_target`'s rule, the directory
    made if missing, then written atomically."""
    os.makedirs(os.path.dirname(os.path.abspath(output_target(dst))), exist_ok=True)
    atomic_write_bytes(dst, data.encode() if isinstance(data, str) else data)
