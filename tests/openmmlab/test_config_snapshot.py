"""Every runnable config merges to the same settings as the stored snapshot.

``tests/data/merged_configs.json`` holds ``Config.fromfile(path).to_dict()`` of every config under
``configs/`` outside ``_base_`` folders, taken before the configs were reorganised to share
their common pieces. A refactoring of the config files (new bases, moved blocks)
must leave every merged config as it was; a change of settings is a deliberate act: rewrite the
snapshot with ``python tests/openmmlab/test_config_snapshot.py --write`` and let the diff show it. New
configs: ``--add`` writes their lines and leaves every stored line as it is.

Tuples are stored as ``{"__tuple__": [...]}`` so that a tuple turned into a list is a change.

The one allowance: ``ADDED_HELPERS``, top-level variables that the reorganisation introduced so
that configs can share a value (no runner, model or dataset reads a top-level variable it does not
know). Where a config did not have one before, its new value is not compared; what the helper feeds
(``model.backbone`` and so on) still is. A helper that already existed must keep its value.

One more allowance: ``RENAMED_IMPORTS``, modules of ``custom_imports.imports`` that moved (
``import inline_dense`` became light, and the OpenMMLab registration moved to the adapter module
``inline_dense.openmmlab``). The snapshot's old name is read as the new one; any other difference
in ``custom_imports``, its order included, still fails.
"""
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if __name__ == '__main__':  # run as a script (--write, --add): tests/ on the path, as pytest puts it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIG_ROOT = ROOT / 'configs'
SNAPSHOT = ROOT / 'tests' / 'data' / 'merged_configs.json'
CONFIGS = sorted(p for p in CONFIG_ROOT.rglob('*.py') if '_base_' not in p.relative_to(CONFIG_ROOT).parts)
_MISSING = '<missing>'
ADDED_HELPERS = {
    'inline_recipe_backbone',  # configs/_base_/inline_common.py: the backbone outputs every recipe shares
    'inline_backbone', 'inline_channels',  # configs/toy/_base_/inline-*-mini.py: the toy backbones
    'inline_mask2former_paramwise_cfg',  # configs/_base_/recipes/inline_mask2former_paramwise.py: Mask2Former's groups
}

RENAMED_IMPORTS = {'inline_dense': 'inline_dense.openmmlab'}  # the OpenMMLab adapter module


def with_renamed_imports(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (snapshot data) with ``custom_imports.imports`` renamed by ``RENAMED_IMPORTS``."""
    imports = config.get('custom_imports', {}).get('imports')
    if not isinstance(imports, list):
        return config
    renamed = [RENAMED_IMPORTS.get(name, name) for name in imports]
    return dict(config, custom_imports=dict(config['custom_imports'], imports=renamed))


def plain(value: Any) -> Any:
    """``value`` as JSON data, tuples marked."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return {'__tuple__': [plain(v) for v in value]}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f'{type(value).__name__} in a config: the snapshot stores JSON data only')


def merged(path: Path) -> dict[str, Any]:
    """The merged config as JSON data (read once per session with test_configs, helpers.load_config)."""
    return plain(load_config(path).to_dict())


def differences(old: Any, new: Any, where: str = '') -> Iterator[str]:
    """One line per leaf that differs: ``model.backbone.window_size: 7 -> <missing>``."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            yield from differences(old.get(key, _MISSING), new.get(key, _MISSING), f'{where}.{key}' if where else key)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            yield from differences(a, b, f'{where}[{i}]')
    elif old != new:
        yield f'{where}: {json.dumps(old)} -> {json.dumps(new)}'


def load_snapshot() -> dict[str, Any]:
    return json.loads(SNAPSHOT.read_text())


def test_snapshot_covers_every_config():
    assert sorted(load_snapshot()) == [str(p.relative_to(CONFIG_ROOT)) for p in CONFIGS]


@pytest.mark.parametrize('path', CONFIGS, ids=[str(p.relative_to(CONFIG_ROOT)) for p in CONFIGS])
def test_merged_config_is_unchanged(path: Path):
    old = with_renamed_imports(load_snapshot()[str(path.relative_to(CONFIG_ROOT))])
    new = {k: v for k, v in merged(path).items() if k in old or k not in ADDED_HELPERS}
    changed: list[str] = list(differences(old, new))
    assert not changed, f'{path.relative_to(ROOT)} merges to other settings than the snapshot:\n' + '\n'.join(changed)


def test_only_the_named_import_is_renamed():
    old = {'custom_imports': {'imports': ['inline_dense', 'inline_dense.openmmlab.toy_datasets'],
                              'allow_failed_imports': False}, 'x': 1}
    assert with_renamed_imports(old) == {
        'custom_imports': {'imports': ['inline_dense.openmmlab', 'inline_dense.openmmlab.toy_datasets'],
                           'allow_failed_imports': False}, 'x': 1}
    assert with_renamed_imports({'x': 1}) == {'x': 1}


def test_differences_name_each_changed_leaf():
    old = {'model': {'backbone': {'window_size': 7, 'out_indices': {'__tuple__': [0, 1]}}}, 'lr': [1, 2]}
    new = {'model': {'backbone': {'out_indices': [0, 1]}}, 'lr': [1, 3], 'extra': None}
    assert list(differences(old, new)) == [
        'extra: "<missing>" -> null',
        'lr[1]: 2 -> 3',
        'model.backbone.out_indices: {"__tuple__": [0, 1]} -> [0, 1]',
        'model.backbone.window_size: 7 -> "<missing>"',
    ]


def snapshot_line(path: Path) -> str:
    """One config a line, keys sorted: a change shows as a changed line in the diff."""
    return (f'{json.dumps(str(path.relative_to(CONFIG_ROOT)))}: '
            f'{json.dumps(merged(path), sort_keys=True, separators=(",", ":"))}')


def write_snapshot(add_only: bool = False) -> None:
    """Every config's line; with ``add_only``, the stored lines kept as they are (a new helper in an
    existing config does not rewrite it) and a line added for each config the snapshot lacks."""
    stored = {}
    if add_only:
        for line in SNAPSHOT.read_text().splitlines()[1:-1]:
            line = line.removesuffix(',')
            stored[json.loads(line.split(': ', 1)[0])] = line
    lines = [stored.get(str(p.relative_to(CONFIG_ROOT))) or snapshot_line(p) for p in CONFIGS]
    SNAPSHOT.write_text('{\n' + ',\n'.join(lines) + '\n}\n')


if __name__ == '__main__':
    if sys.argv[1:] not in (['--write'], ['--add']):
        sys.exit('usage: python tests/openmmlab/test_config_snapshot.py --write | --add  '
                 '(rewrites tests/data/merged_configs.json | adds the configs it lacks, keeping the rest)')
    write_snapshot(add_only=sys.argv[1] == '--add')
