"""The checkpoint cache cannot be poisoned or truncated: names come from URLs only,
no download replaces another URL's file, only complete archives enter, a failed rename leaves no
record, a read-only cache serves what it holds, files get the umask's mode. Served from 127.0.0.1
only (see test_checkpoint_download)."""
import builtins
import hashlib
import json
import os
import stat
import threading
from pathlib import Path

import pytest
import test_checkpoint_download as downloads
import torch
from reference_models import authors_checkpoint, load_reference
from test_checkpoint_download import cache_entries, cached, publish

from helpers import module_chains
from inline_dense.checkpoint import CheckpointError, DownloadError, checkpoint_cache, read_checkpoint, resolve

# The download tests' fixtures serve these tests too: the local HTTP server, and the empty cache (autouse).
server = downloads.server
isolated = downloads.isolated


def data(variant):
    return Path(authors_checkpoint(variant)).read_bytes()


def test_a_server_named_file_cannot_stand_for_a_short_name(server, monkeypatch):
    evil = f'{server.url}/evil/inline_pvt_mini.pth'  # answers Content-Disposition: filename=inline_swin_t.pth
    assert Path(resolve(evil)).read_bytes() == data('inline_pvt_mini')
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    with pytest.raises(FileNotFoundError, match='not available offline'):
        resolve('inline://inline_swin_t', allow_download=False)
    assert Path(resolve('inline://inline_swin_t')).read_bytes() == data('inline_swin_mini')
    assert server.requests == ['/evil/inline_pvt_mini.pth', '/files/inline_swin_mini.pth']


def test_a_url_ending_in_a_short_names_file_does_not_replace_it(server, monkeypatch):
    published = f'{server.url}/files/inline_swin_mini.pth'
    publish(monkeypatch, 'inline_swin_t', published)
    first = Path(resolve('inline://inline_swin_t'))
    server.files['inline_swin_t.pth'] = data('inline_pvt_mini')
    other = Path(resolve(f'{server.url}/files/inline_swin_t.pth'))
    assert other != first
    assert other.read_bytes() == data('inline_pvt_mini')
    assert Path(resolve('inline://inline_swin_t')) == first
    assert first.read_bytes() == data('inline_swin_mini')
    assert json.loads(first.with_name(first.name + '.json').read_text())['url'] == published


def test_a_cut_download_without_content_length_never_enters_the_cache(server, monkeypatch):
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/nolen/inline_swin_mini.pth')
    with pytest.raises(DownloadError, match='not a complete checkpoint: it is cut off') as info:
        resolve('inline://inline_swin_t')
    assert 'checkpoints/inline_swin_t.pth' in str(info.value)
    assert cache_entries() == []
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    assert Path(resolve('inline://inline_swin_t')).read_bytes() == data('inline_swin_mini')


def test_a_failed_rename_leaves_neither_the_file_nor_its_record(server, monkeypatch):
    """The record is written before the rename (a file never appears without it); when the rename
    then fails, the record goes too, with the temporary file."""
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    replace, seen = os.replace, []

    def refused_replace(src, dst, **kwargs):
        if not str(dst).endswith('.pth'):  # the record's own atomic write
            return replace(src, dst, **kwargs)
        seen.extend(sorted(p.name for p in Path(dst).parent.iterdir() if p.name.endswith('.json')))
        raise PermissionError(13, 'Permission denied')
    monkeypatch.setattr(os, 'replace', refused_replace)
    with pytest.raises(PermissionError):
        resolve('inline://inline_swin_t')
    assert len(seen) == 1
    assert seen[0].startswith('inline_swin_t-')  # the record existed before the rename
    assert cache_entries() == []
    monkeypatch.setattr(os, 'replace', replace)
    assert Path(resolve('inline://inline_swin_t')).read_bytes() == data('inline_swin_mini')


def test_a_download_goes_one_way(server, monkeypatch):
    """No module of inline_dense.checkpoint is entered twice on one call stack of a first use (the
    cache's module docstring states the chain)."""
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    chains = module_chains(lambda: resolve('inline://inline_swin_t'), 'inline_dense.checkpoint')
    assert ('sources', 'cache', 'download') in chains
    assert ('sources', 'cache', 'archive') in chains
    assert [chain for chain in chains if len(set(chain)) != len(chain)] == []


def test_load_pretrained_goes_one_way(server, monkeypatch):
    """The whole of a first ``load_pretrained``: resolve and download, the safe read, the checks and
    the load, with no module of inline_dense.checkpoint entered twice on one call stack."""
    from inline_dense.checkpoint import load_pretrained
    from inline_dense.models import InLineSwin
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    arch = load_reference('inline_swin_mini')['arch']
    model = InLineSwin(embed_dims=arch['embed_dim'], depths=arch['depths'], num_heads=arch['num_heads'],
                       attn_type=arch['attn_type'], out_norm=False)
    chains = module_chains(lambda: load_pretrained(model, 'inline://inline_swin_t'), 'inline_dense.checkpoint')
    for expected in [('loading', 'sources', 'cache', 'download'), ('loading', 'reading', 'safe_unpickle'),
                     ('loading', 'finite')]:
        assert expected in chains, expected
    assert [chain for chain in chains if len(set(chain)) != len(chain)] == []
    weights = torch.load(authors_checkpoint('inline_swin_mini'), weights_only=True)['model']['patch_embed.proj.weight']
    assert torch.equal(model.patch_embed.proj.weight.detach(), weights)


def test_two_urls_with_one_server_name_downloading_at_once(server):
    urls = {v: f'{server.url}/slow/{v}.pth' for v in ('inline_swin_mini', 'inline_pvt_mini')}
    got = {}
    threads = [threading.Thread(target=lambda v=v: got.update({v: resolve(urls[v])})) for v in urls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(got.values())) == 2
    for variant, path in got.items():
        assert Path(path).read_bytes() == data(variant), variant


def test_a_read_only_cache_serves_what_it_holds(server, monkeypatch):
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    path = resolve('inline://inline_swin_t')
    cache = checkpoint_cache()
    for p in [*cache.iterdir(), cache]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    real_open = builtins.open

    def read_only_open(file, mode='r', *args, **kwargs):  # root ignores modes: refuse writes here too
        if str(file).startswith(str(cache)) and any(c in mode for c in 'wax+'):
            raise PermissionError(13, 'Permission denied', str(file))
        return real_open(file, mode, *args, **kwargs)
    monkeypatch.setattr(builtins, 'open', read_only_open)
    try:
        assert resolve('inline://inline_swin_t') == path
        with pytest.raises(DownloadError, match=r'not writable.*INLINE_DENSE_CACHE'):
            resolve(f'{server.url}/files/inline_pvt_mini.pth')
    finally:
        cache.chmod(0o755)


def test_downloaded_files_respect_the_umask(server):
    old = os.umask(0o022)
    try:
        path = Path(resolve(f'{server.url}/files/inline_swin_mini.pth'))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.with_name(path.name + '.json').stat().st_mode) == 0o644


def _record(path, url):
    path.with_name(path.name + '.json').write_text(json.dumps(
        {'url': url, 'sha256': hashlib.sha256(path.read_bytes()).hexdigest(), 'size': path.stat().st_size}))


def test_an_unreadable_cached_file_is_reported_with_what_to_delete(server, monkeypatch):
    """A recorded entry that does not read as a checkpoint (written by hand over a download, say) is
    named with the files to delete, not fetched again behind the user's back."""
    url = f'{server.url}/files/inline_swin_mini.pth'
    publish(monkeypatch, 'inline_swin_t', url)
    cache = checkpoint_cache()
    cache.mkdir(parents=True)
    path = cached(url)
    path.write_bytes(data('inline_swin_mini')[:1000])
    _record(path, url)
    with pytest.raises(CheckpointError, match=r'ends early.*It is in the checkpoint cache: delete .*\.json'):
        read_checkpoint(resolve('inline://inline_swin_t'))
    assert server.requests == []
