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

The cache and its entries (names from the URL alone, records, verification, the lock between
processes) are :mod:`inline_dense.checkpoint.cache`'s. ``inline_dense.openmmlab.mmengine_scheme``
makes ``mmengine.runner.load_checkpoint(model, 'inline://...')`` work too.
"""
import logging
import os
import re
import urllib.parse
from pathlib import Path
from typing import NamedTuple

from .. import registry, variants
from . import cache
from .cache import checkpoint_cache
from .errors import CORE, Advice

log = logging.getLogger(__name__)

SCHEME = 'inline://'


class Published(NamedTuple):
    """An ImageNet-1K checkpoint the authors publish (LeapLabTHU/InLine README, "Pretrained Models")."""
    title: str
    url: str | None  # None: not known here; the name resolves from local files / the cache only
    top1: float         # the authors' ImageNet-1K top-1 (224x224), percent


PUBLISHED: dict[str, Published] = {}
"""The names of ``inline://``, read from :data:`inline_dense.variants.VARIANTS` (a family registered later joins)."""
registry.follow(lambda spec: PUBLISHED.update({w.name: Published(variants.title(w.name), w.url, w.top1)
                                               for w in spec.weights}))


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


def _stem(url: str) -> str | None:
    """The short name whose published file ``url`` is, if any: its cache entry's stem."""
    return next((v for v, p in PUBLISHED.items() if p.url == url), None)


def cache_name(url: str) -> str:
    """The cache file name of ``url`` (``cache.entry_name``), the stem being the short name for the
    authors' URLs."""
    return cache.entry_name(url, _stem(url))


def _local_candidates(variant: str) -> list[Path]:
    rel = Path('checkpoints') / variants.file_name(variant)
    return [Path.cwd() / rel, repo_root() / rel]


def hand_placed_path(variant: str) -> Path:
    """Where a file of ``inline://<variant>`` downloaded by hand goes: ``<cache>/<variant>.pth``
    (``$INLINE_DENSE_CACHE/checkpoints``, default ``~/.cache/inline_dense/checkpoints``), the
    one place the docs and the error messages name; it serves every checkout and directory."""
    return checkpoint_cache() / variants.file_name(variant)


def _manual_hint(variant: str | None, url: str | None, advice: Advice) -> str:
    """Where to put the file by hand, and how to load it from elsewhere in the caller's terms
    (``advice``)."""
    where = f'save it as {hand_placed_path(variant)}' if variant else 'save it anywhere'
    get = f'Download {url} by hand (e.g. in a browser) and {where}' if url else f'Put the file there: {where}'
    return f'{get}, or {advice.elsewhere or advice.other_file}; no conversion is needed.'


def resolve_variant(variant: str, allow_download: bool = True, advice: Advice = CORE) -> Path:
    """The file for ``inline://<variant>``: checkpoints/ (cwd, then checkout), the file placed by
    hand in the cache, the cached download, a download."""
    for candidate in _local_candidates(variant):
        if candidate.is_file():
            return candidate
    placed = hand_placed_path(variant)
    if placed.is_file():
        return cache.adopt(placed, PUBLISHED[variant].url, f'inline://{variant}')
    published = PUBLISHED[variant]
    if published.url is None:
        raise FileNotFoundError(f'inline://{variant}: no local file (looked at '
                                f'{", ".join(map(str, [*_local_candidates(variant), hand_placed_path(variant)]))}) '
                                f'and the download URL of {published.title} is not known to inline_dense. '
                                f'{_manual_hint(variant, None, advice)}')
    return cache.fetch(published.url, variant, allow_download, _manual_hint(variant, published.url, advice),
                       f'inline://{variant}')


def resolve_url(url: str, allow_download: bool = True, advice: Advice = CORE) -> Path:
    """The cached download of ``url``, else a download."""
    return cache.fetch(url, _stem(url), allow_download, _manual_hint(None, url, advice), url)


def resolve(checkpoint: str, allow_download: bool = True, advice: Advice = CORE) -> str:
    """A local file for ``checkpoint`` (a short name, URL or path); see the module docstring.
    ``advice``: the caller's terms for a failed download's hint (the core's own by default).

    Raises ValueError (unknown short name, a URL scheme other than http(s) / file), FileNotFoundError
    (not available and no URL / ``allow_download=False``), DownloadError, CorruptCacheError (a cached
    file changed).
    """
    checkpoint = os.fspath(checkpoint)
    if checkpoint.startswith(SCHEME):
        return str(resolve_variant(variant_of(checkpoint), allow_download, advice))
    if checkpoint.startswith(('http://', 'https://')):
        return str(resolve_url(checkpoint, allow_download, advice))
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
