"""Atomic file writes: readers see the old content or the new one, never a part.

The data goes to a temporary file in the destination's directory, is flushed to disk, given
the mode an ordinary ``open(..., 'w')`` would give (``0o666`` less the umask; ``mkstemp``
alone gives ``0o600``) and renamed into place (``os.replace`` is atomic on POSIX). On any error
the temporary file is removed. A writer with checks of its own between the write and the rename
(the checkpoint cache, ``checkpoint.cache``) takes the two steps itself: :func:`temporary_path`,
then :func:`commit`. Used by the cache, ``checkpoint.saving``, the ONNX export and the training
checkpoints (``openmmlab.engine.checkpointing``).
"""
import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator, Union

PathLike = Union[str, 'os.PathLike[str]']
TMP_PREFIX = '.tmp-'


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
    """A fresh temporary file name next to ``dst`` (created empty, mode 0600)."""
    dst = Path(dst)
    fd, tmp = tempfile.mkstemp(dir=str(dst.parent), prefix=f'{TMP_PREFIX}{dst.name}.', suffix='.part')
    os.close(fd)
    return tmp


def commit(tmp: PathLike, dst: PathLike) -> None:
    """fsyncs ``tmp``, gives it the umask's mode, renames it to ``dst`` and makes the rename
    durable. ``tmp`` is removed on any error."""
    try:
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
