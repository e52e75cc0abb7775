"""Atomic, verified downloads into the checkpoint cache.

A download goes to a temporary file in the cache directory, is fsynced and renamed into place,
so a partial file never carries a cache name. Then ``<file>.json`` (the sidecar) records the URL,
size and sha256; every later use re-hashes the file and compares (:func:`verify`). A cached file
that no longer matches raises :class:`CorruptCacheError` telling the user to delete it: it is never
replaced silently (a changing file may mean a failing disk or a deliberate edit).
"""
import contextlib
import hashlib
import json
import os
import re
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional

from mmengine.logging import print_log

CHUNK = 1 << 20
TIMEOUT_S = 60.0


class DownloadError(RuntimeError):
    """A download failed; the message names the URL, the reason and where to put the file by hand."""


class CorruptCacheError(RuntimeError):
    """A cached file differs from what was downloaded (its sha256 no longer matches)."""


@contextlib.contextmanager
def cache_lock(cache_dir: Path, name: str) -> Iterator[None]:
    """Serialises look-up + download of one cache entry between processes (e.g. the ranks of a
    distributed run starting together): the second waits, then finds the file cached.
    A no-op where ``fcntl`` is missing (Windows)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f'.{name}.lock', 'a+') as handle:
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
    try:
        with open(sidecar_of(path)) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def write_sidecar(path: Path, record: Dict[str, Any]) -> None:
    """Atomically writes ``record`` as ``<path>.json``."""
    _atomic_write(sidecar_of(path), json.dumps(record, indent=1, sort_keys=True).encode())


def _atomic_write(dst: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=str(dst.parent), prefix=f'.{dst.name}.', suffix='.part')
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dst)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def verify(path: Path) -> Dict[str, Any]:
    """Checks a cached file against its sidecar; returns the sidecar record.

    A file without a sidecar (placed in the cache by hand, or a crash between the rename and
    the sidecar write, when the file itself is complete) is adopted: hashed and recorded.
    Raises :class:`CorruptCacheError` when the sha256 differs.
    """
    record = read_sidecar(path)
    actual = sha256_of(path)
    if record is None or 'sha256' not in record:
        record = {'url': None, 'sha256': actual, 'size': path.stat().st_size,
                  'note': 'adopted: found in the cache without a record', 'recorded_at': _now()}
        write_sidecar(path, record)
        print_log(f'checkpoint cache: {path} had no integrity record; recorded sha256 {actual[:12]}...',
                  logger='current')
        return record
    if actual != record['sha256']:
        raise CorruptCacheError(
            f'cached checkpoint {path} does not match the sha256 recorded when it was downloaded '
            f'(expected {record["sha256"]}, got {actual}; source {record.get("url")}): it was modified '
            f'or corrupted on disk. Delete it and its record ({sidecar_of(path)}); the next run '
            f'downloads it again.')
    return record


def _now() -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


def filename_from_headers(headers: Any) -> Optional[str]:
    """The file name in a Content-Disposition header, made safe (no directories), or None."""
    value = headers.get('Content-Disposition') or ''
    match = re.search(r"filename\*\s*=\s*[^']*'[^']*'([^;]+)", value) or \
        re.search(r'filename\s*=\s*"([^"]+)"', value) or re.search(r'filename\s*=\s*([^;]+)', value)
    if not match:
        return None
    name = os.path.basename(urllib.parse.unquote(match.group(1)).strip().replace('\\', '/'))
    name = re.sub(r'[^A-Za-z0-9._+-]', '_', name).lstrip('.')
    return name or None


@contextlib.contextmanager
def _progress(total: Optional[int], label: str) -> Iterator[Callable[[int], None]]:
    """Yields ``advance(n_bytes)``: tqdm if installed, else rich (an mmengine dependency), else nothing."""
    try:
        from tqdm import tqdm
        with tqdm(total=total, unit='B', unit_scale=True, unit_divisor=1024, desc=label) as bar:
            yield bar.update
        return
    except ImportError:
        pass
    try:
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)
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


def download(url: str, cache_dir: Path, name: Optional[str], fallback: str, manual_hint: str) -> Path:
    """Downloads ``url`` into ``cache_dir`` atomically; returns the final path.

    ``name``: the cache file name; None takes Content-Disposition's file name if the server sends
    one, else ``fallback`` (a name taken by another URL's file is prefixed with ``fallback``'s stem).
    ``manual_hint`` ends every error message (where to put the file by hand).
    Follows redirects (urllib). Writes the sidecar after the rename.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)

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
    with response:
        header_name = filename_from_headers(response.headers)
        final = cache_dir / (name or header_name or fallback)
        if name is None and final.exists() and (read_sidecar(final) or {}).get('url') != url:
            final = cache_dir / f'{Path(fallback).stem}_{final.name}'
        size = response.headers.get('Content-Length')
        total = int(size) if size and size.isdigit() else None
        fd, tmp = tempfile.mkstemp(dir=str(cache_dir), prefix=f'.{final.name}.', suffix='.part')
        digest, received = hashlib.sha256(), 0
        print_log(f'downloading {url} to {final}' + (f' ({total / 2**20:.1f} MiB)' if total else ''),
                  logger='current')
        try:
            with os.fdopen(fd, 'wb') as f, _progress(total, final.name) as advance:
                while True:
                    try:
                        chunk = response.read(CHUNK)
                    except (OSError, ValueError) as exc:  # reset, timeout, IncompleteRead
                        raise fail(f'the connection broke after {received} bytes ({type(exc).__name__}: {exc})')
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
                f.flush()
                os.fsync(f.fileno())
            if total is not None and received != total:
                raise fail(f'the connection closed after {received} of {total} bytes')
            if received == 0:
                raise fail('the server sent an empty file')
            os.replace(tmp, final)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    with contextlib.suppress(OSError):  # make the rename durable
        dir_fd = os.open(str(cache_dir), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    record = {'url': url, 'final_url': response.geturl(), 'sha256': digest.hexdigest(), 'size': received,
              'content_disposition_filename': header_name, 'downloaded_at': _now()}
    write_sidecar(final, record)
    print_log(f'saved {final} ({received / 2**20:.1f} MiB, sha256 {record["sha256"][:12]}...)', logger='current')
    return final
