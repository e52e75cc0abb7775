"""The HTTP transfer of one URL into a file object the caller opened, with its checks.

:func:`transfer` streams the body into ``out`` and returns what the cache records of it (url,
final_url, sha256, size, downloaded_at). It refuses what is visibly not a checkpoint or not whole:
an HTTP error, no connection, a first chunk that is neither a zip archive nor a pickle (a login
page, an expired link), fewer or more bytes than Content-Length announced, an empty body, a
connection that broke. Those raise :class:`DownloadError` naming the URL, the reason and, at the
end, the caller's hint (where to put the file by hand). An error writing ``out`` (a full disk)
propagates as it is: the file is the caller's. Where the bytes go, whether they become a file and
what else must hold (a complete archive, a record) is the cache's (``checkpoint.cache``).
"""
import contextlib
import hashlib
import http.client
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

log = logging.getLogger(__name__)

CHUNK = 1 << 20
TIMEOUT_S = 60.0


class DownloadError(RuntimeError):
    """A download failed; the message names the URL, the reason and where to put the file by hand."""


def _now() -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())


@contextlib.contextmanager
def _progress(total: int | None, label: str) -> Iterator[Callable[[int], None]]:
    """Yields ``advance(n_bytes)`` for a tqdm bar (tqdm comes with timm and mmengine; without it, none)."""
    try:
        from tqdm import tqdm  # optional: progress bars only
    except ImportError:
        yield lambda _: None
        return
    with tqdm(total=total, unit='B', unit_scale=True, unit_divisor=1024, desc=label) as bar:
        yield bar.update


def _looks_like_checkpoint(head: bytes) -> bool:
    """A torch zip archive (PK..) or a legacy pickle (0x80 protocol byte)."""
    return head[:4] == b'PK\x03\x04' or head[:1] == b'\x80'


# what a URL may hold as it is (RFC 3986 reserved and unreserved characters, and '%' of an escape
# already made); anything else (a space, a non-ASCII letter, a control character) is percent-encoded
URL_SAFE = ":/?#[]@!$&'()*+,;=-._~%"


def quote_url(url: str) -> str:
    """``url`` as a browser sends it: a raw space or non-ASCII letter percent-encoded, the rest kept."""
    return urllib.parse.quote(url, safe=URL_SAFE)


def transfer(url: str, out: BinaryIO, manual_hint: str, dest: Path) -> dict[str, Any]:
    """Streams the body of ``url`` into ``out``; returns its record: url, final_url, sha256, size,
    downloaded_at.

    ``dest`` is the path the caller will give the file, named in the log and the progress bar
    only; the bytes go to ``out`` (flushed on return). ``manual_hint`` ends every error message.
    Follows redirects (urllib). Raises :class:`DownloadError` (see the module docstring) and the
    ``OSError`` of a failed write to ``out``.
    """
    def fail(reason: str) -> DownloadError:
        return DownloadError(f'could not download {url}: {reason}. {manual_hint}')

    request = urllib.request.Request(quote_url(url), headers={'User-Agent': 'inline_dense (python urllib)'})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as exc:
        raise fail(f'the server answered HTTP {exc.code} {exc.reason}') from exc
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        reason = getattr(exc, 'reason', exc)
        raise fail(f'no connection ({reason}): offline, or the host is blocked') from exc
    with response:
        size = response.headers.get('Content-Length')
        total = int(size) if size and size.isdigit() else None
        digest, received = hashlib.sha256(), 0
        log.info(f'downloading {url} to {dest}' + (f' ({total / 2**20:.1f} MiB)' if total else ''))
        with _progress(total, dest.name) as advance:
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
                out.write(chunk)
                digest.update(chunk)
                received += len(chunk)
                advance(len(chunk))
        if total is not None and received != total:
            raise fail(f'the connection closed after {received} of {total} bytes')
        if received == 0:
            raise fail('the server sent an empty file')
        out.flush()
        return dict(url=url, final_url=response.geturl(), sha256=digest.hexdigest(), size=received,
                    downloaded_at=_now())
