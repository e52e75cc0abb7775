"""The transfer of one URL into a file, complete or not at all (the cache entry around it:
``checkpoint.cache``).

The body streams into a temporary file beside the destination (``atomic.atomic_writer``). It
becomes the file only once it is complete: the announced length arrived, and it reads as a
checkpoint archive (``archive.archive_problem``; with no Content-Length, that is the only
evidence). The caller's ``on_complete(tmp, record)`` runs before the rename (the cache writes the
record there: a file in the cache always has one). Failures raise :class:`DownloadError` naming
the URL, the reason and, at the end, the caller's hint (where to put the file by hand).
"""
import contextlib
import errno
import hashlib
import logging
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Optional

from .archive import archive_problem
from .atomic import atomic_writer

log = logging.getLogger(__name__)

CHUNK = 1 << 20
TIMEOUT_S = 60.0


class DownloadError(RuntimeError):
    """A download failed; the message names the URL, the reason and where to put the file by hand."""


def _now() -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


@contextlib.contextmanager
def _progress(total: Optional[int], label: str) -> Iterator[Callable[[int], None]]:
    """Yields ``advance(n_bytes)`` for a tqdm bar (tqdm comes with timm and mmengine; without it, none)."""
    try:
        from tqdm import tqdm  # optional: progress bars only
    except ImportError:
        yield lambda n: None
        return
    with tqdm(total=total, unit='B', unit_scale=True, unit_divisor=1024, desc=label) as bar:
        yield bar.update


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


def download(url: str, final: Path, manual_hint: str,
             on_complete: Optional[Callable[[Path, Dict[str, Any]], None]] = None) -> Path:
    """Downloads ``url`` to ``final`` (a path chosen by the caller); returns ``final``.

    The file appears only complete and readable as a checkpoint (see the module docstring).
    ``record``: url, final_url, sha256, size, downloaded_at; ``on_complete(tmp, record)`` may refuse
    the file by raising. ``manual_hint`` ends every error message. Follows redirects (urllib).
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
        if on_complete is not None:
            on_complete(tmp, record)

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
