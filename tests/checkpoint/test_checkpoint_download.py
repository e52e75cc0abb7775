"""``inline://<variant>`` names and http(s) URLs resolve to verified local files.

A local HTTP server on 127.0.0.1 serves the authors'-layout fixture checkpoints: a redirect,
a download cut off half-way, a Tsinghua-Cloud-style link with Content-Disposition, an HTML page,
a 404. Nothing here touches the internet.
"""
import hashlib
import http.server
import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from reference_models import VARIANTS, authors_checkpoint, build_reference_backbone

import inline_dense.openmmlab  # noqa: F401  (registers the inline:// scheme with mmengine)
from inline_dense import registry
from inline_dense.checkpoint import (
    CorruptCacheError,
    DownloadError,
    checkpoint_cache,
    load_pretrained,
    resolve,
    sources,
)
from inline_dense.checkpoint.sources import Published

TOL = 1e-4  # as tests/families/test_fidelity.py


def max_errors(model, ref):
    """Max abs error of every stage output against the authors' model, per fixture case."""
    errors = []
    with torch.no_grad():
        for case in ref['cases']:
            for out, expected in zip(model(case['input']), case['stages']):
                errors.append((out - expected).abs().max().item())
    return errors


class FixtureServer(http.server.ThreadingHTTPServer):
    """Serves ``files`` (name -> bytes) under several behaviours; records every request path."""
    daemon_threads = True

    def __init__(self, files):
        super().__init__(('127.0.0.1', 0), Handler)
        self.files = files
        self.requests = []

    @property
    def url(self):
        return f'http://127.0.0.1:{self.server_address[1]}'


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass

    def do_GET(self):
        server = self.server
        server.requests.append(self.path)
        parts = self.path.split('?')[0].strip('/').split('/')
        kind, name = parts[0], parts[-1]
        if kind == 'redirect':
            self.send_response(302)
            self.send_header('Location', f'/files/{name}')
            self.end_headers()
            return
        if kind == 'html':
            body = b'<html><body>This link has expired</body></html>'
            self._send(200, body, 'text/html')
            return
        if kind == 'f':  # https://cloud.tsinghua.edu.cn/f/<id>/?dl=1 style: the id names the file
            name = parts[1]
        data = server.files.get(name)
        if data is None:
            self._send(404, b'not found', 'text/plain')
            return
        if kind == 'slow':  # a server that takes its time (two downloads overlap)
            time.sleep(0.3)
        if kind == 'nolen':  # no Content-Length: send half, hang up
            self.send_response(200)
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if kind == 'cut':  # announce the whole file, send half, hang up
            self.send_response(200)
            self.send_header('Content-Length', str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        extra = {'Content-Disposition': f'attachment; filename="{name}.pth"'} if kind == 'f' else {}
        if kind in ('evil', 'slow'):  # any link whose server names its file like a short name's
            extra = {'Content-Disposition': 'attachment; filename=inline_swin_t.pth'}
        self._send(200, data, 'application/octet-stream', extra)

    def _send(self, code, body, kind, extra=None):
        self.send_response(code)
        self.send_header('Content-Type', kind)
        self.send_header('Content-Length', str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def server():
    files = {f'{v}.pth': Path(authors_checkpoint(v)).read_bytes() for v in VARIANTS}
    files.update({v: Path(authors_checkpoint(v)).read_bytes() for v in VARIANTS})  # /f/<id>/ links
    srv = FixtureServer(files)
    # shutdown() waits for the serving loop's next poll: at the default 0.5 s, half a second per test
    thread = threading.Thread(target=srv.serve_forever, kwargs=dict(poll_interval=0.01), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(autouse=True)
def isolated(no_local_checkpoints):
    """Every test here: an empty cache, a working directory and 'repository root' without checkpoints/."""
    return no_local_checkpoints


def publish(monkeypatch, variant, url):
    """Points the short name ``variant`` at ``url`` (the real table points at Tsinghua Cloud)."""
    old = sources.PUBLISHED[variant]
    monkeypatch.setitem(sources.PUBLISHED, variant, Published(old.title, url, old.top1))


def cached(url):
    return checkpoint_cache() / sources.cache_name(url)


def cache_entries():
    """The cache's files, without the (empty) lock files; temporary files do count."""
    cache = checkpoint_cache()
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith('.lock')) if cache.exists() else []


def test_cache_dir_follows_env(isolated):
    assert checkpoint_cache() == isolated / 'cache' / 'checkpoints'


def test_redirect_is_followed_and_integrity_recorded(server, monkeypatch):
    url = f'{server.url}/redirect/inline_swin_mini.pth'
    publish(monkeypatch, 'inline_swin_t', url)
    path = Path(resolve('inline://inline_swin_t'))
    assert path == cached(url)
    assert path.name.startswith('inline_swin_t-')
    assert server.requests == ['/redirect/inline_swin_mini.pth', '/files/inline_swin_mini.pth']
    original = Path(authors_checkpoint('inline_swin_mini')).read_bytes()
    assert path.read_bytes() == original
    record = json.loads(path.with_name(path.name + '.json').read_text())
    assert record['sha256'] == hashlib.sha256(original).hexdigest()
    assert record['size'] == len(original)
    assert record['url'].endswith('/redirect/inline_swin_mini.pth')
    assert cache_entries() == [path.name, path.name + '.json']  # no temporary files left


def test_second_use_makes_no_request(server, monkeypatch):
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    first = resolve('inline://inline_swin_t')
    assert len(server.requests) == 1

    def offline(*args, **kwargs):
        raise AssertionError('a request was made although the file is cached')
    monkeypatch.setattr(urllib.request, 'urlopen', offline)
    assert resolve('inline://inline_swin_t') == first
    model, ref = build_reference_backbone('inline_swin_mini', 'inline://inline_swin_t')
    assert max(max_errors(model, ref)) < TOL
    assert len(server.requests) == 1


def test_cut_off_download_leaves_nothing_and_says_so(server, monkeypatch):
    url = f'{server.url}/cut/inline_swin_mini.pth'
    publish(monkeypatch, 'inline_swin_t', url)
    with pytest.raises(DownloadError) as info:
        resolve('inline://inline_swin_t')
    message = str(info.value)
    size = len(Path(authors_checkpoint('inline_swin_mini')).read_bytes())
    assert url in message
    assert f'closed after {size // 2} of {size} bytes' in message
    assert f'save it as {checkpoint_cache() / "inline_swin_t.pth"}' in message
    assert 'by hand' in message
    assert cache_entries() == []  # no partial file, no record, no temporary file
    # the next attempt downloads again (nothing half-written is taken for the file)
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    assert Path(resolve('inline://inline_swin_t')).read_bytes() == \
        Path(authors_checkpoint('inline_swin_mini')).read_bytes()


def test_processes_starting_together_download_once(server, monkeypatch):
    """Like the ranks of a distributed run: the second waits for the first, then uses its file."""
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    results = []
    threads = [threading.Thread(target=lambda: results.append(resolve('inline://inline_swin_t')))
               for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert len(results) == 3
    assert server.requests == ['/files/inline_swin_mini.pth']


def test_corrupted_cache_file_is_detected(server, monkeypatch):
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    path = Path(resolve('inline://inline_swin_t'))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptCacheError, match='Delete it and its record') as info:
        resolve('inline://inline_swin_t')
    assert str(path) in str(info.value)
    assert 'downloads it again' in str(info.value)
    with pytest.raises(CorruptCacheError):
        build_reference_backbone('inline_swin_mini', 'inline://inline_swin_t')
    assert len(server.requests) == 1
    path.unlink()
    path.with_name(path.name + '.json').unlink()
    assert Path(resolve('inline://inline_swin_t')).read_bytes() == \
        Path(authors_checkpoint('inline_swin_mini')).read_bytes()


def test_failed_download_names_url_reason_and_where_to_put_the_file(server, monkeypatch):
    url = f'{server.url}/files/missing.pth'
    publish(monkeypatch, 'inline_pvt_s', url)
    with pytest.raises(DownloadError) as info:
        resolve('inline://inline_pvt_s')
    message = str(info.value)
    assert url in message
    assert 'HTTP 404' in message
    assert 'checkpoints/inline_pvt_s.pth' in message
    # the torch API's terms (the OpenMMLab adapter passes init_cfg's: tests/openmmlab/test_configs.py)
    assert 'pass another checkpoint' in message
    assert 'init_cfg' not in message
    # no server at all
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    publish(monkeypatch, 'inline_pvt_s', f'http://127.0.0.1:{port}/files/inline_pvt_mini.pth')
    with pytest.raises(DownloadError, match='no connection'):
        resolve('inline://inline_pvt_s')
    assert cache_entries() == []


def test_a_web_page_is_not_taken_for_a_checkpoint(server, monkeypatch):
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/html/expired')
    with pytest.raises(DownloadError, match='text/html, not a PyTorch checkpoint'):
        resolve('inline://inline_swin_t')
    assert cache_entries() == []


def test_resolution_order_local_then_cache_then_download(server, monkeypatch, isolated):
    publish(monkeypatch, 'inline_pvt_t', f'{server.url}/files/inline_pvt_mini.pth')
    repo_file = isolated / 'repo' / 'checkpoints' / 'inline_pvt_t.pth'
    repo_file.parent.mkdir(parents=True)
    repo_file.write_bytes(b'repo')
    assert resolve('inline://inline_pvt_t') == str(repo_file)
    cwd_file = Path.cwd() / 'checkpoints' / 'inline_pvt_t.pth'
    cwd_file.parent.mkdir()
    cwd_file.write_bytes(b'cwd')
    assert resolve('inline://inline_pvt_t') == str(cwd_file)
    assert server.requests == []
    cwd_file.unlink()
    repo_file.unlink()
    url = sources.PUBLISHED['inline_pvt_t'].url
    assert resolve('inline://inline_pvt_t') == str(cached(url))
    assert len(server.requests) == 1
    assert resolve('inline://inline_pvt_t', allow_download=False) == str(cached(url))


def test_a_file_put_into_the_cache_by_hand_is_used_without_a_request(server, monkeypatch):
    """<cache>/<variant>.pth is where a file downloaded by hand goes: used, never replaced by
    a download; tests/checkpoint/test_offline_weights.py follows the docs' steps."""
    publish(monkeypatch, 'inline_swin_s', f'{server.url}/files/inline_swin_mini.pth')
    cache = checkpoint_cache()
    cache.mkdir(parents=True)
    (cache / 'inline_swin_s.pth').write_bytes(Path(authors_checkpoint('inline_pvt_mini')).read_bytes())
    path = Path(resolve('inline://inline_swin_s'))
    assert path == cache / 'inline_swin_s.pth'
    assert server.requests == []


def test_unknown_name_and_unknown_url(monkeypatch):
    with pytest.raises(ValueError, match=r"unknown checkpoint name 'inline://inline_swin_xl'.*inline_cswin_t"):
        resolve('inline://inline_swin_xl')
    publish(monkeypatch, 'inline_cswin_t', None)
    with pytest.raises(FileNotFoundError, match='download URL of InLine-CSwin-T is not known'):
        resolve('inline://inline_cswin_t')


# Two families' published top-1, as the authors' README gives them: independent of the specs
AUTHORS_TOP1 = {'inline_cswin_t': 83.2, 'inline_cswin_s': 83.8, 'inline_cswin_b': 84.5,
                'inline_deit_t': 74.5, 'inline_deit_s': 80.2, 'inline_deit_b': 82.3}


def test_published_table_has_every_variant_with_the_authors_top1():
    assert list(sources.PUBLISHED) == [w.name for _, w in registry.all_weights()]
    assert {name: sources.PUBLISHED[name].top1 for name in AUTHORS_TOP1} == AUTHORS_TOP1
    for published in sources.PUBLISHED.values():
        assert published.url.startswith('https://cloud.tsinghua.edu.cn/f/')
        assert published.url.endswith('/?dl=1')


def test_raw_url_names(server):
    known = sources.PUBLISHED['inline_swin_t'].url
    assert sources.cache_name(known).startswith('inline_swin_t-')
    assert sources.cache_name('https://cloud.tsinghua.edu.cn/f/abc123/?dl=1').startswith('abc123-')
    assert sources.cache_name('https://example.org/w/model_best.pth?x=1').startswith('model_best-')
    assert sources.cache_name('https://example.org/w/model_best.pth?x=1') != \
        sources.cache_name('https://example.org/w/model_best.pth?x=2')
    # a Tsinghua-style link (the server sends Content-Disposition, which names nothing here)
    url = f'{server.url}/f/inline_pvt_mini/?dl=1'
    path = Path(resolve(url))
    assert path == cached(url)
    assert path.name.startswith('inline_pvt_mini-')
    assert resolve(url) == str(path)
    assert len(server.requests) == 1


@pytest.mark.parametrize('variant', VARIANTS)
@pytest.mark.parametrize('how', ['url', 'short_name'])
def test_fidelity_fixtures_through_the_url_path(server, monkeypatch, variant, how):
    """Loaded through a URL / short name, the fixtures give exactly the outputs of the local file."""
    url = f'{server.url}/redirect/{variant}.pth'
    checkpoint = url
    if how == 'short_name':
        short = next(spec.weights[0].name for spec in registry.FAMILIES.values() if spec.fixture.name == variant)
        publish(monkeypatch, short, url)
        checkpoint = f'inline://{short}'
    model, ref = build_reference_backbone(variant, checkpoint)
    local, _ = build_reference_backbone(variant, authors_checkpoint(variant))
    assert max(max_errors(model, ref)) < TOL
    with torch.no_grad():
        for a, b in zip(model(ref['cases'][0]['input']), local(ref['cases'][0]['input'])):
            assert torch.equal(a, b)


def test_mmengine_load_checkpoint_understands_the_scheme(server, monkeypatch):
    from mmengine.runner import CheckpointLoader, load_checkpoint
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    ckpt = CheckpointLoader.load_checkpoint('inline://inline_swin_t', map_location='cpu')
    authors = torch.load(authors_checkpoint('inline_swin_mini'), weights_only=True)['model']
    assert set(ckpt['state_dict']) == set(authors)
    assert ckpt['meta']['inline_weights'] == "model weights ('model')"

    class Holder(torch.nn.Module):  # the authors' patch embedding, by their key names
        def __init__(self):
            super().__init__()
            self.patch_embed = torch.nn.Module()
            self.patch_embed.proj = torch.nn.Conv2d(3, 16, 4, 4)
    holder = Holder()
    load_checkpoint(holder, 'inline://inline_swin_t', map_location='cpu')
    torch.testing.assert_close(holder.patch_embed.proj.weight, authors['patch_embed.proj.weight'])
    assert len(server.requests) == 1


@pytest.fixture
def log_lines():
    """Messages of mmengine's current logger (its handlers keep the stream of their first test)."""
    import logging

    from mmengine.logging import MMLogger
    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    yield lines
    logger.removeHandler(handler)


def test_init_cfg_with_a_short_name_logs_the_source(server, monkeypatch, log_lines):
    publish(monkeypatch, 'inline_swin_t', f'{server.url}/files/inline_swin_mini.pth')
    model, _ = build_reference_backbone('inline_swin_mini', 'inline://inline_swin_t')
    text = '\n'.join(log_lines)
    assert 'downloading' in text
    assert 'saved' in text
    assert 'inline://inline_swin_t (' in text
    del log_lines[:]
    load_pretrained(model, 'inline://inline_swin_t')  # direct call, as init_weights does
    assert not any('downloading' in line for line in log_lines)
    assert len(server.requests) == 1


def test_a_url_with_a_raw_space_is_quoted_as_a_browser_does(server):
    """A raw space made http.client raise InvalidURL, past the one-line errors."""
    data = server.files['inline_swin_mini.pth']
    server.files['my%20swin%C3%A9.pth'] = data  # the server sees the path as sent, percent-encoded
    path = Path(resolve(f'{server.url}/files/my swiné.pth'))
    assert path.read_bytes() == data
    assert server.requests == ['/files/my%20swin%C3%A9.pth']
    with pytest.raises(DownloadError, match='HTTP 404'):  # an escape already made is kept, not doubled
        resolve(f'{server.url}/files/other%20name .pth')
    assert server.requests[-1] == '/files/other%20name%20.pth'
