"""Where a checkpoint comes from: ``inline://<variant>``, an http(s) URL, or a path.

:func:`resolve` turns any of them into a local file:

- ``inline://<variant>``: ``checkpoints/<variant>.pth`` relative to the current directory,
  then to this checkout's root (a checkout's own files); then ``<cache>/<variant>.pth``, THE
  place for a file downloaded by hand (:func:`hand_placed_path`: adopted on first use, its sha256
  recorded beside it); then the cached download of the authors' published file (the URLs in
  :data:`PUBLISHED`, read from :mod:`inline_dense.variants`); then that download. Nothing else in
  the cache can stand for a short name.
- ``http(s)://...``: the cached download of exactly that URL, else a download.
- ``file:///path``: that path; any other ``scheme://`` (ftp, s3 ...) is refused naming the scheme.
- anything else: a local path, returned as it is (``~`` expanded).

The cache (``$INLINE_DENSE_CACHE/checkpoints``, default ``~/.cache/inline_dense/checkpoints``) names
each file after its URL alone (:func:`cache_name`: readable stem + hash of the URL), so no server
header and no other URL can take a file's place. Every use checks the file against its record
(URL, sha256). The second use of a name or URL makes no request and takes no lock, so a read-only
cache serves what it holds. ``loading.register_mmengine_scheme`` makes
``mmengine.runner.load_checkpoint(model, 'inline://...')`` work too.
"""
import contextlib
import hashlib
import logging
import os
import re
import time
import urllib.parse
from pathlib import Path
from typing import Dict, NamedTuple, Optional

from .. import variants
from .download import (
    CorruptCacheError,
    DownloadError,
    archive_problem,
    cache_lock,
    delete_hint,
    download,
    read_sidecar,
    sha256_of,
    sidecar_of,
    verify,
    write_sidecar,
)

log = logging.getLogger(__name__)

SCHEME = 'inline://'


class Published(NamedTuple):
    """An ImageNet-1K checkpoint the authors publish (LeapLabTHU/InLine README, "Pretrained Models")."""
    title: str
    url: Optional[str]  # None: not known here; the name resolves from local files / the cache only
    top1: float         # the authors' ImageNet-1K top-1 (224x224), percent


PUBLISHED: Dict[str, Published] = {name: Published(variants.title(name), v.url, v.top1)
                                   for name, v in variants.VARIANTS.items()}
"""The names of ``inline://``, read from :data:`inline_dense.variants.VARIANTS`."""


def cache_root() -> Path:
    """``$INLINE_DENSE_CACHE``, else ``${XDG_CACHE_HOME:-~/.cache}/inline_dense`` (as tools/setup_env.sh)."""
    root = os.environ.get('INLINE_DENSE_CACHE')
    if not root:
        root = os.path.join(os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'), 'inline_dense')
    return Path(root).expanduser()


def checkpoint_cache() -> Path:
    return cache_root() / 'checkpoints'


def repo_root() -> Path:
    """The checkout this package was imported from (inline_dense/checkpoint/ -> two levels up)."""
    return Path(__file__).resolve().parents[2]


def variant_of(checkpoint: str) -> str:
    """``'inline://<variant>'`` -> ``'<variant>'``; raises ValueError for a name not in the variant table."""
    variant = checkpoint[len(SCHEME):].strip('/')
    if variant not in PUBLISHED:
        raise ValueError(f'unknown checkpoint name {checkpoint!r}; use inline://<variant> with one of '
                         f'{sorted(PUBLISHED)}, an http(s) URL, or a file path.')
    return variant


def cache_name(url: str) -> str:
    """The cache file name of ``url``: ``<stem>-<12 hex digits of sha256(url)>.pth``, the stem being
    the short name for the authors' URLs, else the URL's last path part (the ``<id>`` of
    ``https://cloud.tsinghua.edu.cn/f/<id>/?dl=1``) without its extension."""
    stem = next((v for v, p in PUBLISHED.items() if p.url == url), None)
    if stem is None:
        parts = [p for p in urllib.parse.urlsplit(url).path.split('/') if p]
        name = urllib.parse.unquote(parts[-1]) if parts else urllib.parse.urlsplit(url).netloc
        stem = re.sub(r'[^A-Za-z0-9._+-]', '_', name.rsplit('.', 1)[0] if '.' in name else name).strip('.')
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return f'{stem[:64] or "download"}-{digest}.pth'


def _local_candidates(variant: str) -> list:
    rel = Path('checkpoints') / variants.file_name(variant)
    return [Path.cwd() / rel, repo_root() / rel]


def hand_placed_path(variant: str) -> Path:
    """Where a file of ``inline://<variant>`` downloaded by hand goes: ``<cache>/<variant>.pth``
    (``$INLINE_DENSE_CACHE/checkpoints``, default ``~/.cache/inline_dense/checkpoints``), the
    one place the docs and the error messages name; it serves every checkout and directory."""
    return checkpoint_cache() / variants.file_name(variant)


def _manual_hint(variant: Optional[str], url: Optional[str]) -> str:
    where = f'save it as {hand_placed_path(variant)}' if variant else 'save it anywhere'
    get = f'Download {url} by hand (e.g. in a browser) and {where}' if url else f'Put the file there: {where}'
    return (f'{get}, or point the backbone\'s init_cfg.checkpoint at the file wherever it is; no conversion '
            f'is needed.')


class HandPlacedCheckpointError(CorruptCacheError):
    """The file at :func:`hand_placed_path` is not a readable checkpoint, or changed since it was adopted."""


class UnreadableCacheError(CorruptCacheError):
    """A cached file with a correct record that does not read as a checkpoint (an older version's
    download cut off without Content-Length)."""


def _cached(path: Path, url: str, repair: bool) -> Optional[Path]:
    """``path`` if it is a verified, complete download of ``url``; None if absent. A complete
    record over an unreadable file (written by an older version) is deleted when ``repair``
    (the caller holds the lock and downloads again), else reported with what to delete."""
    if not path.is_file():
        return None
    verify(path, url)
    problem = archive_problem(path, thorough=False)
    if problem is None:
        return path
    if not repair:
        raise UnreadableCacheError(f'cached checkpoint {path} (from {url}) is not a readable checkpoint: {problem}. '
                                f'{delete_hint(path).capitalize()}; the next run downloads it again.')
    log.warning(f'checkpoint cache: {path} is not a readable checkpoint ({problem}); downloading {url} again')
    path.unlink()
    sidecar_of(path).unlink()
    return None


def _older_download(path: Path, url: Optional[str], record: dict) -> Optional[Path]:
    """``path``, downloaded to the hand-placed name by an older inline_dense (its record names a URL):
    used if it came from ``url`` and is complete, else ignored with a warning (a download follows)."""
    if url is None or record.get('url') != url:
        problem = f'its record names {record.get("url")!r}, not the published file {url}'
    else:
        verify(path, url)
        problem = archive_problem(path, thorough=False)
        if problem is None:
            return path
    log.warning(f'checkpoint cache: ignoring {path} (downloaded there by an older inline_dense): {problem}; '
                f'{delete_hint(path)}')
    return None


def _hand_placed(variant: str) -> Optional[Path]:
    """:func:`hand_placed_path` if a file is there, else None.

    Without a record (a file downloaded by hand) it must read as a checkpoint; it is then adopted:
    its sha256 is recorded beside it (``<file>.json``, skipped in a read-only cache), so a later
    change to it is caught. Adopted earlier, it must still have the recorded sha256; downloaded
    there by an older inline_dense, see :func:`_older_download`.
    """
    path = hand_placed_path(variant)
    if not path.is_file():
        return None
    url = PUBLISHED[variant].url
    record = read_sidecar(path)
    if record is not None and 'sha256' in record and record.get('source') != 'placed by hand':
        return _older_download(path, url, record)
    if record is not None and 'sha256' in record:
        actual = sha256_of(path)
        if actual != record['sha256']:
            raise HandPlacedCheckpointError(
                f'{path} (inline://{variant}) changed since its sha256 was recorded in {sidecar_of(path)} '
                f'({record["sha256"][:12]}..., now {actual[:12]}...): a damaged disk or a replaced file; if you '
                f'replaced it on purpose, delete {sidecar_of(path)} and the next run adopts the new file.')
        return path
    problem = archive_problem(path, thorough=True)
    if problem is not None:
        raise HandPlacedCheckpointError(
            f'{path}, placed there for inline://{variant}, is not a readable checkpoint: {problem}. Download '
            f'{url or "the file"} again (the whole file; a browser may save the web page instead) and replace it.')
    adopted = dict(url=url, source='placed by hand', sha256=sha256_of(path), size=path.stat().st_size,
                   adopted_at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))
    try:
        write_sidecar(path, adopted)
        recorded = f'its sha256 recorded in {sidecar_of(path)}'
    except OSError as exc:  # a read-only cache still serves the file
        recorded = f'not recorded ({type(exc).__name__}: {exc.strerror or exc})'
    log.info(f'checkpoint cache: using {path}, placed by hand for inline://{variant} ({recorded})')
    return path


def resolve_variant(variant: str, allow_download: bool = True) -> Path:
    """The file for ``inline://<variant>``: checkpoints/ (cwd, then checkout), the file placed by
    hand in the cache, the cached download, a download."""
    for candidate in _local_candidates(variant):
        if candidate.is_file():
            return candidate
    placed = _hand_placed(variant)
    if placed is not None:
        return placed
    published = PUBLISHED[variant]
    if published.url is None:
        raise FileNotFoundError(f'inline://{variant}: no local file (looked at '
                                f'{", ".join(map(str, [*_local_candidates(variant), hand_placed_path(variant)]))}) '
                                f'and the download URL of {published.title} is not known to inline_dense. '
                                f'{_manual_hint(variant, None)}')
    return _resolve_url(published.url, allow_download, variant)


def resolve_url(url: str, allow_download: bool = True) -> Path:
    """The cached download of ``url``, else a download."""
    return _resolve_url(url, allow_download, None)


def _resolve_url(url: str, allow_download: bool, variant: Optional[str]) -> Path:
    cache = checkpoint_cache()
    path = cache / cache_name(url)
    broken = None
    try:
        found = _cached(path, url, repair=False)
    except UnreadableCacheError as exc:  # repaired below, under the lock
        found, broken = None, exc
    if found is not None:
        return found
    hint = _manual_hint(variant, url)
    if not allow_download:
        what = f'inline://{variant}' if variant else url
        if broken is not None:
            raise broken
        raise FileNotFoundError(f'{what} is not available offline (not in the checkpoint cache {cache}). {hint}')
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(cache_lock(cache, path.name))  # another process may be downloading it
        except DownloadError as exc:  # a read-only cache: say what is wrong with the file it holds
            if broken is not None:
                raise broken from exc
            raise
        found = _cached(path, url, repair=True)
        return found if found is not None else download(url, path, hint)


def resolve(checkpoint: str, allow_download: bool = True) -> str:
    """A local file for ``checkpoint`` (a short name, URL or path); see the module docstring.

    Raises ValueError (unknown short name, a URL scheme other than http(s) / file), FileNotFoundError
    (not available and no URL / ``allow_download=False``), DownloadError, CorruptCacheError (a cached
    file changed).
    """
    checkpoint = os.fspath(checkpoint)
    if checkpoint.startswith(SCHEME):
        return str(resolve_variant(variant_of(checkpoint), allow_download))
    if checkpoint.startswith(('http://', 'https://')):
        return str(resolve_url(checkpoint, allow_download))
    scheme = _SCHEME_RE.match(checkpoint)
    if scheme and scheme.group(1).lower() == 'file':
        parts = urllib.parse.urlsplit(checkpoint)
        if parts.netloc not in ('', 'localhost'):
            raise ValueError(f'{checkpoint!r}: a file:// URL names a file on this machine (file:///path or '
                             f'file://localhost/path), not on host {parts.netloc!r}.')
        return urllib.parse.unquote(parts.path)
    if scheme and len(scheme.group(1)) > 1:  # one letter: a Windows drive (C:\\...)
        raise ValueError(f'{checkpoint!r}: the URL scheme {scheme.group(1)}:// is not supported; use http(s)://, '
                         f'file://, inline://<variant> or a local path.')
    return os.path.expanduser(checkpoint)


_SCHEME_RE = re.compile(r'^([A-Za-z][A-Za-z0-9+.-]*)://')
