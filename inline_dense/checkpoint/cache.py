"""The checkpoint cache: a cache entry's whole life, its name, download, record, verification and lock.

The cache is ``$INLINE_DENSE_CACHE/checkpoints`` (default ``~/.cache/inline_dense/checkpoints``).
An entry is a file and its record ``<file>.json`` (URL, size, sha256):

- **name**: from the URL alone (:func:`entry_name`: a readable stem + a hash of the URL), so no
  server header and no other URL can take a file's place;
- **download** (:func:`fetch`): under a lock (:func:`lock`, ``filelock``, between processes, e.g.
  the ranks of a distributed run starting together: the second waits, then finds the file), in one
  line: a temporary file in the cache, the HTTP transfer into it (``download.transfer``), the
  completeness check (``archive.archive_problem``), the record, the rename
  (``atomic.commit``). The record is written before the rename, so a file never appears without
  it; a failure at any step leaves neither the file, its record nor the temporary file;
- **verification**: every use re-hashes the file and compares it with its record
  (:func:`verify`); a file that no longer matches raises :class:`CorruptCacheError` naming the
  files to delete. It is never replaced silently (a changing file may mean a failing disk or an edit);
- a file **placed by hand** (:func:`adopt`) is adopted on first use: its sha256 is recorded, so a
  later change to it is caught the same way.

The second use of an entry makes no request and takes no lock, so a read-only cache serves what it holds.

One way down: ``loading.load_pretrained -> sources.resolve -> cache.fetch -> download.transfer |
archive.archive_problem | atomic`` (temporary_path, commit); each returns here, none calls back up.
"""
import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import time
import urllib.parse
from pathlib import Path
from typing import Any

import filelock

from .archive import archive_problem
from .atomic import atomic_write_bytes, commit, temporary_path
from .download import DownloadError, transfer

log = logging.getLogger(__name__)

CHUNK = 1 << 20
HAND_PLACED = 'placed by hand'
DISK_FULL = (errno.ENOSPC, getattr(errno, 'EDQUOT', errno.ENOSPC))


class CorruptCacheError(RuntimeError):
    """A cached file differs from what was downloaded, or its record names another URL."""


class HandPlacedCheckpointError(CorruptCacheError):
    """A file placed in the cache by hand is not a readable checkpoint, or changed since it was adopted."""


def cache_root() -> Path:
    """``$INLINE_DENSE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/inline_dense`` (as tools/setup_env.sh)."""
    root = os.environ.get('INLINE_DENSE_CACHE')
    if not root:
        root = os.path.join(os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'inline_dense')
    return Path(root).expanduser()


def checkpoint_cache() -> Path:
    return cache_root() / 'checkpoints'


def entry_name(url: str, stem: str | None = None) -> str:
    """The cache file name of ``url``: ``<stem>-<12 hex digits of sha256(url)>.pth``; the stem is
    ``stem`` when given (the short name of a published URL), else the URL's last path part (the
    ``<id>`` of ``https://cloud.tsinghua.edu.cn/f/<id>/?dl=1``) without its extension."""
    if stem is None:
        parts = [p for p in urllib.parse.urlsplit(url).path.split('/') if p]
        name = urllib.parse.unquote(parts[-1]) if parts else urllib.parse.urlsplit(url).netloc
        stem = re.sub(r'[^A-Za-z0-9._+-]', '_', name.rsplit('.', 1)[0] if '.' in name else name).strip('.')
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return f'{stem[:64] or "download"}-{digest}.pth'


# ---------------------------------------------------------------------- records
def record_path(path: Path) -> Path:
    return path.with_name(path.name + '.json')


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(CHUNK), b''):
            digest.update(chunk)
    return digest.hexdigest()


def read_record(path: Path) -> dict[str, Any] | None:
    """The record of ``path``; None when there is none or it is not a JSON object."""
    try:
        with open(record_path(path)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Atomically writes ``record`` as ``<path>.json``."""
    atomic_write_bytes(record_path(path), json.dumps(record, indent=1, sort_keys=True).encode())


def delete_hint(path: Path) -> str:
    return f'delete {path} and its record {record_path(path)}'


def verify(path: Path, url: str) -> dict[str, Any]:
    """Checks a cached download against its record: it must come from ``url`` and still have the
    recorded sha256. Returns the record; raises :class:`CorruptCacheError` otherwise."""
    record = read_record(path)
    if record is None or 'sha256' not in record or record.get('url') != url:
        source = 'has no readable record' if record is None or 'sha256' not in record else \
            f'was downloaded from {record.get("url")!r}'
        raise CorruptCacheError(f'cached checkpoint {path} {source}, not from {url}: it cannot be trusted as that '
                                f'file. {delete_hint(path).capitalize()}; the next run downloads it again.')
    actual = sha256_of(path)
    if actual != record['sha256']:
        raise CorruptCacheError(
            f'cached checkpoint {path} does not match the sha256 recorded when it was downloaded '
            f'(expected {record["sha256"]}, got {actual}; source {url}): it was modified '
            f'or corrupted on disk. Delete it and its record ({record_path(path)}); the next run '
            f'downloads it again.')
    return record


# ---------------------------------------------------------------------- the lock and the download
def lock(cache_dir: Path, name: str) -> filelock.FileLock:
    """The lock of entry ``name`` between processes (``.<name>.lock`` in the cache). Only downloads
    take it. Raises DownloadError when the cache cannot be written (nothing can be downloaded into it)."""
    path = cache_dir / f'.{name}.lock'
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with open(path, 'a'):  # the lock file must be creatable: say so here, not as filelock's timeout
            pass
    except OSError as exc:
        raise DownloadError(f'the checkpoint cache {cache_dir} is not writable ({exc}), so {name} cannot be '
                            f'downloaded into it: set INLINE_DENSE_CACHE to a writable directory, or put the '
                            f'file there from a machine that can write it') from exc
    return filelock.FileLock(str(path))


def fetch(url: str, stem: str | None, allow_download: bool, hint: str, what: str) -> Path:
    """The verified entry of ``url`` (named with ``stem``), downloaded first if absent.

    ``hint`` ends the error messages (where to put the file by hand); ``what`` names the request
    in them (``inline://<variant>`` or the URL). Raises FileNotFoundError (absent and
    ``allow_download=False``), DownloadError, CorruptCacheError.
    """
    cache = checkpoint_cache()
    path = cache / entry_name(url, stem)
    if path.is_file():
        verify(path, url)
        return path
    if not allow_download:
        raise FileNotFoundError(f'{what} is not available offline (not in the checkpoint cache {cache}). {hint}')
    with lock(cache, path.name):  # another process may be downloading it
        if path.is_file():
            verify(path, url)
            return path
        return _download(url, path, hint)


def _download(url: str, path: Path, hint: str) -> Path:
    """Downloads ``url`` as the entry ``path`` (the caller holds its lock) and returns ``path``: a
    temporary file in the cache, the transfer, the completeness check, the record, the rename. On
    any failure the temporary file and the record are removed; a full disk is named with the fix."""
    tmp: Path | None = None
    record: dict[str, Any] | None = None
    try:
        tmp = Path(temporary_path(path))
        with open(tmp, 'wb') as out:
            record = transfer(url, out, hint, path)
        problem = archive_problem(tmp)
        if problem is not None:
            raise DownloadError(f'could not download {url}: the file received is not a complete checkpoint: '
                                f'{problem}. {hint}')
        write_record(path, record)  # before the rename: a file in the cache always has its record
        commit(tmp, path)
    except BaseException as exc:
        received = record['size'] if record is not None else _size(tmp)
        if not path.exists():  # not renamed into place (no one else writes it: the lock)
            for leftover in [record_path(path)] + ([tmp] if tmp is not None else []):
                with contextlib.suppress(OSError):
                    leftover.unlink()
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            raise DownloadError(f'could not download {url}: no space left on device in the checkpoint cache '
                                f'{path.parent} after {received} bytes ({exc.strerror}); nothing was kept. Free '
                                f'space there, or set INLINE_DENSE_CACHE to a directory on a disk with room. '
                                f'{hint}') from exc
        raise
    log.info(f'saved {path} ({record["size"] / 2**20:.1f} MiB, sha256 {record["sha256"][:12]}...)')
    return path


def _size(path: Path | None) -> int:
    """The size of ``path`` on disk, 0 when there is none."""
    try:
        return path.stat().st_size if path is not None else 0
    except OSError:
        return 0


# ---------------------------------------------------------------------- files placed by hand
def adopt(path: Path, url: str | None, what: str) -> Path:
    """``path``, a file placed in the cache by hand for ``what`` (``inline://<variant>``, published
    at ``url``). Adopted earlier (a record with a sha256 beside it), it must still have that sha256;
    otherwise it must read as a checkpoint, and its sha256 is recorded (skipped in a read-only cache)."""
    record = read_record(path)
    if record is not None and 'sha256' in record:
        actual = sha256_of(path)
        if actual != record['sha256']:
            raise HandPlacedCheckpointError(
                f'{path} ({what}) changed since its sha256 was recorded in {record_path(path)} '
                f'({record["sha256"][:12]}..., now {actual[:12]}...): a damaged disk or a replaced file; if you '
                f'replaced it on purpose, delete {record_path(path)} and the next run adopts the new file.')
        return path
    problem = archive_problem(path, thorough=True)
    if problem is not None:
        raise HandPlacedCheckpointError(
            f'{path}, placed there for {what}, is not a readable checkpoint: {problem}. Download '
            f'{url or "the file"} again (the whole file; a browser may save the web page instead) and replace it.')
    adopted = dict(url=url, source=HAND_PLACED, sha256=sha256_of(path), size=path.stat().st_size,
                   adopted_at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))
    try:
        write_record(path, adopted)
        recorded = f'its sha256 recorded in {record_path(path)}'
    except OSError as exc:  # a read-only cache still serves the file
        recorded = f'not recorded ({type(exc).__name__}: {exc.strerror or exc})'
    log.info(f'checkpoint cache: using {path}, placed by hand for {what} ({recorded})')
    return path
