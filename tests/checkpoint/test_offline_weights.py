"""Offline weights, the way checkpoints/README.md says: download the authors' file by hand, save it as
``$INLINE_DENSE_CACHE/checkpoints/<variant>.pth``, and ``inline://<variant>`` uses it without a request.

The file here is the authors'-layout fixture of a mini InLine-Swin (tests/data/fixtures), saved under
the name of InLine-Swin-T; the backbone built is the mini one that fits it. No network: a download
attempt fails the test.
"""
import json
import shutil
from pathlib import Path

import pytest
import torch
from reference_models import authors_checkpoint, build_reference_backbone

import inline_dense.openmmlab  # noqa: F401  (registers the backbones)
from inline_dense.checkpoint import CorruptCacheError, DownloadError, cache, resolve, sources

VARIANT = 'inline_swin_t'


@pytest.fixture
def offline(no_local_checkpoints, monkeypatch):
    """An empty cache under tmp_path (``INLINE_DENSE_CACHE``), no checkpoints/ folder, no network."""
    def no_network(url, out, hint, dest):
        raise DownloadError(f'could not download {url}: no connection (the test is offline). {hint}')
    monkeypatch.setattr(cache, 'transfer', no_network)
    return no_local_checkpoints / 'cache' / 'checkpoints'


def save_by_hand(cache: Path, name: str = f'{VARIANT}.pth', fixture: str = 'inline_swin_mini') -> Path:
    """What a user does: mkdir -p "$INLINE_DENSE_CACHE/checkpoints"; cp downloaded.pth there/<variant>.pth."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / name
    shutil.copyfile(authors_checkpoint(fixture), path)
    return path


def test_the_error_offline_names_the_one_place(offline):
    with pytest.raises(DownloadError) as info:
        resolve(f'inline://{VARIANT}')
    text = str(info.value)
    assert f'save it as {offline / (VARIANT + ".pth")}' in text
    assert '\n' not in text


def test_a_file_saved_by_hand_where_the_docs_say_loads_offline(offline):
    placed = save_by_hand(offline)
    assert resolve(f'inline://{VARIANT}') == str(placed)
    record = json.loads((offline / f'{VARIANT}.pth.json').read_text())
    assert record['source'] == 'placed by hand'
    assert record['url'] == sources.PUBLISHED[VARIANT].url
    # the backbone loads it through init_cfg, as a config names it
    model, _ = build_reference_backbone('inline_swin_mini', f'inline://{VARIANT}')
    direct, _ = build_reference_backbone('inline_swin_mini', authors_checkpoint('inline_swin_mini'))
    got, want = model.state_dict(), direct.state_dict()
    assert got.keys() == want.keys()
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, msg=key)
    # a second use: the same file, checked against its record
    assert resolve(f'inline://{VARIANT}', allow_download=False) == str(placed)


def test_a_hand_placed_file_that_is_not_a_checkpoint_is_refused(offline):
    cache = offline
    cache.mkdir(parents=True)
    (cache / f'{VARIANT}.pth').write_text('<html>Tsinghua Cloud: log in</html>')
    with pytest.raises(CorruptCacheError) as info:
        resolve(f'inline://{VARIANT}')
    text = str(info.value)
    assert 'is not a readable checkpoint' in text
    assert 'Download' in text
    assert '\n' not in text


def test_a_hand_placed_file_that_changed_after_adoption_is_refused(offline):
    placed = save_by_hand(offline)
    resolve(f'inline://{VARIANT}')
    with open(placed, 'r+b') as f:
        f.seek(100)
        f.write(b'\x00\x01\x02')
    with pytest.raises(CorruptCacheError, match=r'changed since its sha256 was recorded.*delete .*\.json'):
        resolve(f'inline://{VARIANT}')


def test_a_read_only_cache_still_serves_a_hand_placed_file(offline, monkeypatch):
    placed = save_by_hand(offline)

    def read_only(path, record):
        raise PermissionError(13, 'Permission denied')
    monkeypatch.setattr(cache, 'write_record', read_only)
    assert resolve(f'inline://{VARIANT}') == str(placed)
    assert not (offline / f'{VARIANT}.pth.json').exists()
