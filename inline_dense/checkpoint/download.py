"""Verified downloads into the checkpoint cache, and the integrity records of cached files.

A download streams into a temporary file in the cache directory. It becomes a cache entry
only once it is complete (the announced length arrived, and the file reads as a checkpoint
archive: with no Content-Length, that is the only evidence) and then under the name its caller
chose, which comes from the URL alone (``sources.cache_name``), never from a response header.
``<file>.json`` (the record) holds the URL, size and sha256 and is written before the file
itself is renamed into place; every later use re-hashes the file and compares (:func:`verify`).
A cached file that no longer matches raises :class:`CorruptCacheError` naming the files to
delete: it is never replaced silently (a changing file may mean a failing disk or an edit).
"""
import contextlib
import errno
import hashlib
import json
import logging
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional

from . import safe_unpickle
from .atomic import atomic_write_bytes, atomic_writer

log = logging.getLogger(__name__)

CHUNK = 1 << 20
TIMEOUT_S = 60.0


class DownloadError(RuntimeError):
    """A download failed; the message names the URL, the reason and where to put the file by hand."""


class CorruptCacheError(RuntimeError):
    """A cached file differs from what was downloaded, or its record names another URL."""


@contextlib.contextmanager
def cache_lock(cache_dir: Path, name: str) -> Iterator[None]:
    """Serialises the download of one cache entry between processes (e.g. the ranks of a
    distributed run starting together): the second waits, then finds the file cached.
    Only downloads take it, so a read-only cache serves what it holds.
    A no-op where ``fcntl`` is missing (Windows)."""
    try:
        import fcntl  # POSIX only
    except ImportError:
        yield
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        handle = open(cache_dir / f'.{name}.lock', 'a+')
    except OSError as exc:
        raise DownloadError(f'the checkpoint cache {cache_dir} is not writable ({exc}), so {name} cannot be '
                            f'downloaded into it: set INLINE_DENSE_CACHE to a writable directory, or put the '
                            f'file there from a machine that can write it') from exc
    with handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def sidecar_of(path: Path) -> Path:
    return path.with_name(path.name + '.json')


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(CHUNK), b''):
            digest.update(chunk)
    return digest.hexdigest()


def read_sidecar(path: Path) -> Optional[Dict[str, Any]]:
    """The record of ``path``; None when there is none or it is not a JSON object."""
    try:
        with open(sidecar_of(path)) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_sidecar(path: Path, record: Dict[str, Any]) -> None:
    """Atomically writes ``record`` as ``<path>.json``."""
    atomic_write_bytes(sidecar_of(path), json.dumps(record, indent=1, sort_keys=True).encode())


def delete_hint(path: Path) -> str:
    return f'delete {path} and its record {sidecar_of(path)}'


def verify(path: Path, url: str) -> Dict[str, Any]:
    """Checks a cached file against its record: it must come from ``url`` and still have the
    recorded sha256. Returns the record; raises :class:`CorruptCacheError` otherwise."""
    record = read_sidecar(path)
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
            f'or corrupted on disk. Delete it and its record ({sidecar_of(path)}); the next run '
            f'downloads it again.')
    return record


def _now() -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


def archive_problem(path: Path, thorough: bool = True) -> Optional[str]:
    """Why ``path`` is not a complete checkpoint file, or None when it is one.

    A zip archive (``torch.save``'s format) must open (a cut file loses the central directory
    at its end) and hold ``data.pkl``; ``thorough`` also checks every member's CRC. A legacy
    (pickle) file must read through the restricted unpickler (which runs none of its code).
    """
    try:
        with open(path, 'rb') as f:
            head = f.read(4)
        if head == b'PK\x03\x04':
            with zipfile.ZipFile(path) as zf:
                if not any(n.endswith('data.pkl') for n in zf.namelist()):
                    return 'a zip archive without data.pkl, not a PyTorch checkpoint'
                bad = zf.testzip() if thorough else None
            return f'member {bad} of the archive is damaged' if bad else None
        if head[:1] == b'\x80':
            safe_unpickle.load(str(path), 'cpu')
            return None
        return 'neither a zip archive nor a pickle'
    except safe_unpickle.RefusedPickle as exc:
        return f'it names code the safe loader refuses ({exc})'
    except (zipfile.BadZipFile, EOFError, OSError, RuntimeError, ValueError, IndexError, KeyError) as exc:
        return f'it is cut off or damaged ({type(exc).__name__}: {str(exc)[:120]})'


@contextlib.contextmanager
def _progress(total: Optional[int], label: str) -> Iterator[Callable[[int], None]]:
    """Yields ``advance(n_bytes)``: tqdm if installed, else rich (an mmengine dependency), else nothing."""
    try:
        from tqdm import tqdm  # optional: progress bars only
        with tqdm(total=total, unit='B', unit_scale=True, unit_divisor=1024, desc=label) as bar:
            yield bar.update
        return
    except ImportError:
        pass
    try:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
    except ImportError:
        yield lambda n: None
        return
    with Progress(TextColumn(label), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  TimeRemainingColumn()) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.update(task, advance=n)


def _looks_like_checkpoint(head: bytes) -> bool:
    """A torch zip archive (PK..) or a legacy pickle (0x80 protocol byte)."""
    return head[:4] == b'PK\x03\x04' or head[:1] == b'\x80'


@contextlib.contextmanager
def _full_disk_named(final: Path, url: str, manual_hint: str, received: Callable[[], int]) -> Iterator[None]:
    """Turns a full disk (or quota) while the download is written into a :class:`DownloadError`
    naming the cache directory and what to do; the partial file is already gone (atomic writer)."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, getattr(errno, 'EDQUOT', errno.ENOSPC)):
            raise
        raise DownloadError(f'could not download {url}: no space left on device in the checkpoint cache '
                            f'{final.parent} after {received()} bytes ({exc.strerror}); nothing was kept. Free '
                            f'space there, or set INLINE_DENSE_CACHE to a directory on a disk with room. '
                            f'{manual_hint}') from exc


def download(url: str, final: Path, manual_hint: str) -> Path:
    """Downloads ``url`` to ``final`` (a cache path chosen by the caller); returns ``final``.

    The file appears only complete and readable as a checkpoint (see :func:`archive_problem`);
    its record is written first. ``manual_hint`` ends every error message (where to put the file
    by hand). Follows redirects (urllib). The caller holds :func:`cache_lock` for ``final``.
    """
    def fail(reason: str) -> DownloadError:
        return DownloadError(f'could not download {url}: {reason}. {manual_hint}')

    request = urllib.request.Request(url, headers={'User-Agent': 'inline_dense (python urllib)'})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        raise fail(f'the server answered HTTP {exc.code} {exc.reason}') from exc
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, 'reason', exc)
        raise fail(f'no connection ({reason}): offline, or the host is blocked') from exc
    record: Dict[str, Any] = {}

    def check(tmp: Path) -> None:
        problem = archive_problem(tmp)
        if problem is not None:
            raise fail(f'the file received is not a complete checkpoint: {problem}')
        write_sidecar(final, record)  # before the file: a file in the cache always has its record

    with response:
        size = response.headers.get('Content-Length')
        total = int(size) if size and size.isdigit() else None
        digest, received = hashlib.sha256(), 0
        log.info(f'downloading {url} to {final}' + (f' ({total / 2**20:.1f} MiB)' if total else ''))
        with _full_disk_named(final, url, manual_hint, lambda: received), atomic_writer(final, check) as f, \
                _progress(total, final.name) as advance:
            while True:
                try:
                    chunk = response.read(CHUNK)
                except (OSError, ValueError) as exc:  # reset, timeout, IncompleteRead
                    raise fail(f'the connection broke after {received} bytes ({type(exc).__name__}: {exc})') from exc
                if not chunk:
                    break
                if received == 0 and not _looks_like_checkpoint(chunk):
                    kind = response.headers.get('Content-Type', 'unknown type')
                    raise fail(f'the server sent {kind}, not a PyTorch checkpoint (an expired link or '
                               f'a login page?)')
                f.write(chunk)
                digest.update(chunk)
                received += len(chunk)
                advance(len(chunk))
            if total is not None and received != total:
                raise fail(f'the connection closed after {received} of {total} bytes')
            if received == 0:
                raise fail('the server sent an empty file')
            record.update(url=url, final_url=response.geturl(), sha256=digest.hexdigest(), size=received,
                          downloaded_at=_now())
    log.info(f'saved {final} ({received / 2**20:.1f} MiB, sha256 {record["sha256"][:12]}...)')
    return final
