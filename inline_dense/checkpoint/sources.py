"""Where a checkpoint comes from: ``inline://<variant>``, an http(s) URL, or a path.

:func:`resolve` turns any of them into a local file:

- ``inline://inline_swin_t``: ``checkpoints/inline_swin_t.pth`` relative to the current directory,
  then to this checkout's root; then the cache (``$INLINE_DENSE_CACHE/checkpoints``, default
  ``~/.cache/inline_dense/checkpoints``, file ``inline_swin_t.pth``, sha256-checked); then a download
  of the authors' published file (the URLs in :data:`PUBLISHED`) into the cache.
- ``http(s)://...``: the cache entry recorded for that URL (the authors' URLs share the short
  names' files), else a download; the file is named after the URL's file name, Content-Disposition's
  file name, or for ``.../f/<id>/?dl=1`` style links the ``<id>``.
- anything else: a local path, returned as it is (``~`` expanded).

The second use of a name or URL makes no request. ``register_mmengine_scheme`` makes
``mmengine.runner.load_checkpoint(model, 'inline://...')`` work too.
"""
import os
import re
import urllib.parse
from pathlib import Path
from typing import Any, Dict, NamedTuple, Optional

from .download import cache_lock, download, read_sidecar, verify

SCHEME = 'inline://'


class Published(NamedTuple):
    """An ImageNet-1K checkpoint the authors publish (LeapLabTHU/InLine README, "Pretrained Models")."""
    title: str
    url: Optional[str]  # None: not known here; the name resolves from local files / the cache only
    top1: float         # the authors' ImageNet-1K top-1 (224x224), percent


_TSINGHUA = 'https://cloud.tsinghua.edu.cn/f/{}/?dl=1'
PUBLISHED: Dict[str, Published] = {
    'inline_swin_t': Published('InLine-Swin-T', _TSINGHUA.format('32810869fcc34410966b'), 82.4),
    'inline_swin_s': Published('InLine-Swin-S', _TSINGHUA.format('e9657fd247c04c7cb1a1'), 83.6),
    'inline_swin_b': Published('InLine-Swin-B', _TSINGHUA.format('bf23564bb64c420aafe1'), 84.1),
    'inline_pvt_t': Published('InLine-PVT-T', _TSINGHUA.format('90ac52b1555b401eb5e6'), 78.2),
    'inline_pvt_s': Published('InLine-PVT-S', _TSINGHUA.format('1ab953b2479d433080a3'), 82.0),
    'inline_pvt_m': Published('InLine-PVT-M', _TSINGHUA.format('a72aec31e6084bc0a280'), 83.2),
    'inline_pvt_l': Published('InLine-PVT-L', _TSINGHUA.format('efd91318ba964f01b288'), 83.6),
    'inline_cswin_t': Published('InLine-CSwin-T', _TSINGHUA.format('49fa2ecc543647c4b970'), 83.2),
    'inline_cswin_s': Published('InLine-CSwin-S', _TSINGHUA.format('59f4e65f776f4052b93c'), 83.8),
    'inline_cswin_b': Published('InLine-CSwin-B', _TSINGHUA.format('91e17121df284ae38521'), 84.5),
}


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
    """``'inline://inline_swin_t'`` -> ``'inline_swin_t'``; raises ValueError for an unknown name."""
    variant = checkpoint[len(SCHEME):].strip('/')
    if variant not in PUBLISHED:
        raise ValueError(f'unknown checkpoint name {checkpoint!r}; use inline://<variant> with one of '
                         f'{sorted(PUBLISHED)}, an http(s) URL, or a file path.')
    return variant


def url_file_name(url: str) -> str:
    """The cache file name for ``url``: the short name's file for the authors' URLs, else the
    URL's file name, else (``https://cloud.tsinghua.edu.cn/f/<id>/?dl=1``) ``<id>.pth``."""
    for variant, published in PUBLISHED.items():
        if published.url == url:
            return f'{variant}.pth'
    parts = [p for p in urllib.parse.urlsplit(url).path.split('/') if p]
    name = urllib.parse.unquote(parts[-1]) if parts else urllib.parse.urlsplit(url).netloc
    name = re.sub(r'[^A-Za-z0-9._+-]', '_', name).lstrip('.') or 'download'
    return name if '.' in name else f'{name}.pth'


def _local_candidates(variant: str) -> list:
    rel = Path('checkpoints') / f'{variant}.pth'
    return [Path.cwd() / rel, repo_root() / rel]


def _manual_hint(variant: Optional[str], url: Optional[str], cached: Path) -> str:
    where = (f'save it as checkpoints/{variant}.pth (in this checkout or the directory you run from) or as '
             f'{cached}' if variant else f'save it as {cached}')
    get = f'Download {url} by hand (e.g. in a browser) and {where}' if url else f'Put the file there: {where}'
    return (f'{get}, or point init_cfg.checkpoint at the file wherever it is (--cfg-options '
            f'model.backbone.init_cfg.checkpoint=/path/file.pth); no conversion is needed.')


def _cached(path: Path) -> Optional[Path]:
    if path.is_file():
        verify(path)  # raises CorruptCacheError on a changed file
        return path
    return None


def resolve_variant(variant: str, allow_download: bool = True) -> Path:
    """The file for ``inline://<variant>``: checkpoints/ (cwd, then checkout), cache, download."""
    for candidate in _local_candidates(variant):
        if candidate.is_file():
            return candidate
    with cache_lock(checkpoint_cache(), f'{variant}.pth'):
        return _cached_or_download_variant(variant, allow_download)


def _cached_or_download_variant(variant: str, allow_download: bool) -> Path:
    cache = checkpoint_cache()
    found = _cached(cache / f'{variant}.pth')
    if found is not None:
        return found
    published = PUBLISHED[variant]
    hint = _manual_hint(variant, published.url, cache / f'{variant}.pth')
    if published.url is None:
        raise FileNotFoundError(f'inline://{variant}: no local file (looked at '
                                f'{", ".join(map(str, _local_candidates(variant)))}, {cache / (variant + ".pth")}) '
                                f'and the download URL of {published.title} is not known to inline_dense. {hint}')
    if not allow_download:
        raise FileNotFoundError(f'inline://{variant} is not available offline. {hint}')
    return download(published.url, cache, f'{variant}.pth', f'{variant}.pth', hint)


def resolve_url(url: str, allow_download: bool = True) -> Path:
    """The cached file for ``url`` (found by name or by the URL its record holds), else a download."""
    with cache_lock(checkpoint_cache(), url_file_name(url)):
        return _cached_or_download_url(url, allow_download)


def _cached_or_download_url(url: str, allow_download: bool) -> Path:
    cache = checkpoint_cache()
    name = url_file_name(url)
    candidate = cache / name
    record = read_sidecar(candidate) if candidate.is_file() else None
    if candidate.is_file() and (record is None or record.get('url') in (None, url)):
        verify(candidate)
        return candidate
    if cache.is_dir():  # a file named by the server (Content-Disposition)
        for sidecar in sorted(cache.glob('*.json')):
            target = sidecar.with_name(sidecar.name[:-len('.json')])
            if target.is_file() and (read_sidecar(target) or {}).get('url') == url:
                verify(target)
                return target
    hint = _manual_hint(None, url, candidate)
    if not allow_download:
        raise FileNotFoundError(f'{url} is not in the checkpoint cache ({cache}). {hint}')
    variant_name = name if name[:-len('.pth')] in PUBLISHED else None
    return download(url, cache, variant_name, name, hint)


def resolve(checkpoint: str, allow_download: bool = True) -> str:
    """A local file for ``checkpoint`` (a short name, URL or path); see the module docstring.

    Raises ValueError (unknown short name), FileNotFoundError (not available and no URL /
    ``allow_download=False``), DownloadError, CorruptCacheError (a cached file changed).
    """
    checkpoint = os.fspath(checkpoint)
    if checkpoint.startswith(SCHEME):
        return str(resolve_variant(variant_of(checkpoint), allow_download))
    if checkpoint.startswith(('http://', 'https://')):
        return str(resolve_url(checkpoint, allow_download))
    return os.path.expanduser(checkpoint)


def load_from_inline(filename: str, map_location: Any = None) -> Dict[str, Any]:
    """mmengine ``CheckpointLoader`` scheme for ``inline://``: the file read safely (see
    ``loading.read_checkpoint``), with the chosen weights (EMA if present) under ``state_dict``
    in the file's own key layout (our backbones' ``init_cfg`` also converts the layout)."""
    from .loading import read_checkpoint, select_weights
    path = resolve(filename)
    obj = read_checkpoint(path, map_location=map_location or 'cpu')
    chosen, which = select_weights(obj, 'auto', repr(path))
    rest = {k: v for k, v in obj.items() if k not in ('model', 'state_dict', 'state_dict_ema', 'model_ema')}
    meta = dict(rest['meta']) if isinstance(rest.get('meta'), dict) else {}
    meta.update(inline_weights=which, inline_source=path)
    return {**rest, 'state_dict': dict(chosen), 'meta': meta}


_registered = False


def register_mmengine_scheme() -> None:
    """Registers ``inline://`` with mmengine's ``CheckpointLoader`` (idempotent)."""
    global _registered
    if _registered:
        return
    from mmengine.runner import CheckpointLoader
    CheckpointLoader.register_scheme(prefixes=SCHEME, loader=load_from_inline, force=True)
    _registered = True
