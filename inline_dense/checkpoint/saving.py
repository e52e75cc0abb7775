"""Writing a checkpoint file without ever destroying the file it replaces.

``save_atomically`` serialises with ``torch.save`` into a temporary file next to the destination
and renames it into place (``atomic.atomic_writer``): an existing file is replaced only by a
complete new one. A full disk is reported as such: torch's zip writer turns the ``ENOSPC`` of the
underlying write into ``RuntimeError: [enforce fail at inline_container.cc:...] unexpected pos``,
so the writes are watched and the disk's own error is raised instead.
``check_output_path`` refuses, before anything is read or written, a destination that is not a
regular file (``atomic.output_target``: a directory, a device, a FIFO), lies in a missing directory,
is the source file itself (through any path or link), or
ends in ``.safetensors`` where the ``safetensors`` package is not installed.
``save_converted`` writes the converter's output: a ``.safetensors`` file (tensors, and the meta
as JSON strings in its header) for that extension, else ``torch.save``'s format; atomically both.
"""
import errno
import json
import os
from collections.abc import Mapping
from typing import IO, Any, cast

import torch

from .atomic import OutputPathError, PathLike, atomic_writer, output_target
from .errors import CheckpointError

# errno values meaning "the file system has no room for the data" (EDQUOT: a quota, where defined)
NO_SPACE = tuple({errno.ENOSPC, getattr(errno, 'EDQUOT', errno.ENOSPC)})


class DiskFullError(CheckpointError):
    """The disk (or the quota) ran out while a checkpoint was written; the destination is unchanged."""


SAFETENSORS_SUFFIX = '.safetensors'


def wants_safetensors(dst: PathLike) -> bool:
    """Whether ``dst`` names a ``.safetensors`` file (any case)."""
    return os.fspath(dst).lower().endswith(SAFETENSORS_SUFFIX)


def _safetensors_save():
    """safetensors' ``save`` (tensors -> bytes), or None where the package is not installed."""
    try:
        from safetensors.torch import save
    except ImportError:
        return None
    return save


def check_output_path(dst: PathLike, src: PathLike | None = None) -> None:
    """Raises :class:`OutputPathError` when ``dst`` exists and is not a regular file (a symlink is
    judged by its target), its directory does not exist,
    it is the same file as ``src`` (compared by real path and by inode: another spelling, a
    symlink and a hard link are all caught), or it ends in ``.safetensors`` and the safetensors
    package is missing."""
    dst = os.fspath(dst)
    if wants_safetensors(dst) and _safetensors_save() is None:
        raise OutputPathError(f'the output {dst} is a .safetensors file, which needs the safetensors package '
                              f'(pip install safetensors); install it, or name the output .pth.')
    target = output_target(dst)  # a directory, device or FIFO is refused; a symlink is written through
    parent = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(parent):
        raise OutputPathError(f'the output {dst} is in {parent}, which does not exist; create it first '
                              f'(mkdir -p {parent}) or write elsewhere.')
    if src is not None and os.path.exists(src) and os.path.exists(dst):
        same = os.path.realpath(src) == os.path.realpath(dst) or os.path.samefile(src, dst)
        if same:
            raise OutputPathError(f'the output {dst} is the input file itself ({os.path.realpath(src)}); writing it '
                                  f'would replace the original. Write the result to another file.')


class _WatchedWriter:
    """A file object's ``write`` that remembers the ``OSError`` it raised (torch may replace it)."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.f.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.f.flush()

    def tell(self) -> int:
        return self.f.tell()


def save_converted(state: Mapping[str, torch.Tensor], meta: dict[str, Any], dst: PathLike) -> None:
    """The converter's output, atomically: ``{'state_dict': state, 'meta': meta}`` by ``torch.save``,
    or, for a ``dst`` ending in ``.safetensors``, the tensors of ``state`` in safetensors' format
    with each ``meta`` value as JSON in the file's metadata (shared or strided tensors are copied
    first: safetensors stores each tensor's own contiguous data)."""
    if not wants_safetensors(dst):
        save_atomically({'state_dict': dict(state), 'meta': meta}, dst)
        return
    save = _safetensors_save()
    if save is None:  # check_output_path says so before any work; this keeps the function safe alone
        raise OutputPathError(f'writing {os.fspath(dst)} needs the safetensors package (pip install safetensors).')
    data = save({k: v.detach().contiguous().clone() for k, v in state.items()},
                metadata={k: json.dumps(v) for k, v in meta.items()})
    _write_atomically(data, dst)


def _write_atomically(data: bytes, dst: PathLike) -> None:
    try:
        with atomic_writer(dst) as f:
            f.write(data)
    except OSError as exc:
        _raise_disk_full(exc, dst)
        raise


def _raise_disk_full(exc: OSError, dst: PathLike) -> None:
    """Raises :class:`DiskFullError` for a write that ran out of space; returns for other errors."""
    if exc.errno not in NO_SPACE:
        return
    kept = 'left unchanged' if os.path.exists(dst) else 'not created'
    raise DiskFullError(f'no space left on device while writing {os.fspath(dst)} ({exc.strerror}); the file '
                        f'was {kept}. Free space on that disk, or write the output to another one.') from exc


def save_atomically(obj: Any, dst: PathLike) -> None:
    """``torch.save(obj, dst)``, atomically: ``dst`` is the complete new file or, after any error,
    exactly what it was before (no temporary file is left). Raises :class:`DiskFullError` (naming
    ``dst``) when the disk or quota is full."""
    try:
        with atomic_writer(dst) as f:
            watched = _WatchedWriter(f)
            try:
                torch.save(obj, cast(IO[bytes], watched))  # a file object: write() and flush()
            except RuntimeError:
                if watched.error is not None:
                    raise watched.error from None
                raise
    except OSError as exc:
        _raise_disk_full(exc, dst)
        raise
