"""The Markdown tables ``tools/make_configs.py`` writes between ``<!-- generated table: NAME
(tools/make_configs.py) -->`` and ``<!-- end of generated table -->``: the config tables (README's
folders, docs/configs.md), read from the metafile; the presets (docs/backbones.md), the published checkpoints
(docs/checkpoints.md, checkpoints/README.md) and the fixtures (tests/data/fixtures/README.md), read
from the registry."""
import re
from pathlib import Path
from typing import Any

import yaml  # PyYAML: mmengine's dependency

from inline_dense import registry, variants

FIXTURES = Path(__file__).resolve().parents[1] / 'tests' / 'data' / 'fixtures'


# ----------------------------------------------------------------------------- tables from the metafile
def read_models(text: str) -> list[dict[str, Any]]:
    return yaml.safe_load(text)['Models']


def folder_table(models: list[dict[str, Any]]) -> str:
    """README: one row per config folder: its model, tasks (on which data), backbones and schedules (each
    with its data where the folder's schedules are for more than one)."""
    rows: dict[str, dict[str, Any]] = {}
    for m in models:
        folder = '/'.join(m['Config'].split('/')[:2]) + '/'
        row = rows.setdefault(folder, dict(models=[], tasks={}, backbones={}, schedules={}))
        meta = m['Metadata']
        if meta['Model'] not in row['models']:
            row['models'].append(meta['Model'])
        for key, value in (('tasks', meta['Task']), ('schedules', meta['Schedule'])):
            data = row[key].setdefault(value, [])
            if meta['Training Data'] not in data:
                data.append(meta['Training Data'])
        title, _, size = meta['Backbone'].partition(' ')[0].rpartition('-')
        sizes = row['backbones'].setdefault(title if 'mini' not in meta['Backbone'] else meta['Backbone'], [])
        if 'mini' not in meta['Backbone'] and size not in sizes:
            sizes.append(size)
    lines = ['| folder | model | tasks (data) | backbones | schedules |', '| --- | --- | --- | --- | --- |']
    titles = [f'InLine-{spec.title}' for spec in registry.FAMILIES.values()]
    order = [w.size.upper() for _, w in registry.all_weights()]
    for folder, row in rows.items():
        found = sorted(row['backbones'].items(), key=lambda item: titles.index(item[0].split(' ')[0]))
        backbones = ', '.join(f'{t}-{"/".join(sorted(s, key=order.index))}' if s else t for t, s in found)
        tasks = ', '.join(f'{task} ({", ".join(data)})' for task, data in row['tasks'].items())
        several = len(row['schedules']) > 1 and len({d for data in row['schedules'].values() for d in data}) > 1
        schedules = ', '.join(f'{s} ({", ".join(data)})' if several else s for s, data in row['schedules'].items())
        lines.append(f'| `{folder}` | {", ".join(row["models"])} | {tasks} | {backbones} | {schedules} |')
    return '\n'.join(lines)


def config_table(models: list[dict[str, Any]]) -> str:
    """docs/configs.md: one row per config (toys left out: docs/toy_runs.md)."""
    lines = ['| config | model | task | backbone | data | schedule | recipe | checkpoint (top-1) |',
             '| --- | --- | --- | --- | --- | --- | --- | --- |']
    for m in models:
        meta = m['Metadata']
        if m['In Collection'] != 'InLine':
            continue
        lines.append(f'| `{m["Config"]}` | {meta["Model"]} | {meta["Task"]} | {meta["Backbone"]} | '
                     f'{meta["Training Data"]} | '
                     f'{meta["Schedule"]} | `{meta["Recipe"]}` | `{meta["Pretrained"]}` '
                     f'({meta["ImageNet-1K top-1"]}) |')
    return '\n'.join(lines)


def preset_table() -> str:
    """docs/backbones.md: every family's presets (its spec's), the shared fields first."""
    show = _show
    shared = ('embed_dims', 'depths', 'num_heads')
    lines = ['| backbone | arch | embed_dims | depths | num_heads | attn_type | other |',
             '|---|---|---|---|---|---|---|']
    for spec in registry.FAMILIES.values():
        for name, preset in spec.presets.items():
            depths = preset.get('depths', preset.get('depth'))  # a plain ViT: its number of blocks
            stages = len(depths) if isinstance(depths, (list, tuple)) else 1
            attn = preset.get('attn_type', 'I' * stages)  # all InLine unless the preset says
            other = ', '.join(f'{k} {show(v)}' for k, v in preset.items()
                              if k not in (*shared, 'depth', 'attn_type'))
            lines.append(f'| {spec.class_name} | {name} | '
                         + ' | '.join(show(depths if k == 'depths' else preset[k]) for k in shared)
                         + f' | {attn} | {other} |')
    return '\n'.join(lines)


def with_table(text: str, name: str, table: str) -> str:
    """``text`` with the table between its markers replaced (the markers must be there)."""
    start, end = f'<!-- generated table: {name} (tools/make_configs.py) -->', '<!-- end of generated table -->'
    pattern = re.compile(re.escape(start) + r'\n.*?' + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f'make_configs: no "{start}" ... "{end}" markers for the {name} table')
    return pattern.sub(lambda _: f'{start}\n{table}\n{end}', text)


# ----------------------------------------------------------------------------- tables from the registry
HOSTS = {'cloud.tsinghua.edu.cn': 'Tsinghua Cloud'}  # how the tables name a download's host


def _download(url: str | None) -> str:
    if url is None:
        return 'not published: a local file only'
    host = url.split('/')[2]
    return f'[{HOSTS.get(host, host)}]({url})'


def weights_table() -> str:
    """docs/checkpoints.md: every published checkpoint of the registry, its short name and download."""
    lines = ["| short name | variant | the authors publish it | authors' ImageNet-1K top-1 (input size) |",
             '| --- | --- | --- | --- |']
    lines += [f'| `inline://{w.name}` | {variants.title(w.name)} | {_download(w.url)} | {w.top1} ({w.input_size}) |'
              for _, w in registry.all_weights()]
    return '\n'.join(lines)


def hand_placed_table() -> str:
    """checkpoints/README.md: every published checkpoint and where a file downloaded by hand goes."""
    lines = ["| short name | variant | file saved by hand | authors' ImageNet-1K top-1 (input size) | "
             "authors' download |", '| --- | --- | --- | --- | --- |']
    lines += [f'| `inline://{w.name}` | {variants.title(w.name)} | '
              f'`$INLINE_DENSE_CACHE/checkpoints/{variants.file_name(w.name)}` | {w.top1} ({w.input_size}) | '
              f'{_download(w.url)} |' for _, w in registry.all_weights()]
    return '\n'.join(lines)


def fixtures_table() -> str:
    """tests/data/fixtures/README.md: each family's fixture, the authors' constructor arguments it was
    made with and its cases, read from its reference file."""
    import torch  # the reference files; only this table needs it
    lines = ["| fixture | family | the authors' model's arguments (the reference's `arch`) | cases (H x W) |",
             '| --- | --- | --- | --- |']
    for spec in registry.FAMILIES.values():
        ref = torch.load(FIXTURES / f'{spec.fixture.name}_reference.pt', weights_only=True)
        arch = ', '.join(f'{k} {_show(v)}' for k, v in ref['arch'].items())
        cases = ', '.join(dict.fromkeys('x'.join(map(str, c['input'].shape[-2:])) for c in ref['cases']))
        lines.append(f'| {spec.fixture.name} | InLine-{spec.title} | {arch} | {cases} |')
    return '\n'.join(lines)


def _show(value: Any) -> str:
    return '-'.join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
