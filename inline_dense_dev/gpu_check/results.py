"""The check's results: a JSON file and a markdown table, both rewritten after every row, so a
run cut short by its time limit still leaves everything measured until then."""
import json
import math
import os
from typing import Any

JSON_NAME = 'gpu_check.json'
MD_NAME = 'gpu_check.md'


def cell(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return '-'
        return f'{value:.3g}' if abs(value) < 1e-2 and value else f'{value:.4g}'
    if isinstance(value, bool):
        return 'yes' if value else 'NO'
    if isinstance(value, (list, tuple)):
        return ' '.join(cell(v) for v in value)
    return str(value).replace('|', '/').replace('\n', ' ')


def table(rows: list[dict[str, Any]]) -> list[str]:
    """A markdown table whose columns are the rows' keys in order of first appearance."""
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    lines = ['| ' + ' | '.join(columns) + ' |', '|' + '---|' * len(columns)]
    lines += ['| ' + ' | '.join(cell(row.get(c, '')) for c in columns) + ' |' for row in rows]
    return lines


def groups(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Rows with the same fields (an error field aside) together: one table each, in the order
    in which each kind of row first came."""
    out: dict[frozenset, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(frozenset(set(row) - {'error'}), []).append(row)
    return list(out.values())


class Results:
    """``meta`` (machine, plan), then per step its rows, status and seconds; ``save()`` writes
    ``gpu_check.json`` and ``gpu_check.md`` into ``out_dir`` (atomically: a kill mid-write
    leaves the previous version)."""

    def __init__(self, out_dir: str, meta: dict[str, Any]) -> None:
        self.out_dir = out_dir
        self.payload: dict[str, Any] = dict(meta=meta, steps={})
        os.makedirs(out_dir, exist_ok=True)

    def step(self, name: str) -> dict[str, Any]:
        return self.payload['steps'].setdefault(name, dict(status='running', seconds=None, rows=[]))

    def add_row(self, step: str, row: dict[str, Any]) -> None:
        self.step(step)['rows'].append(row)
        self.save()

    def finish(self, step: str, seconds: float, error: str = '') -> None:
        entry = self.step(step)
        failed = [r for r in entry['rows'] if r.get('ok') is False]
        entry.update(seconds=round(seconds, 1), status='failed' if error or failed else 'ok')
        if error:
            entry['error'] = error
        self.save()

    def markdown(self) -> str:
        meta = self.payload['meta']
        lines = ['# GPU check', '', '| | |', '|---|---|']
        lines += [f'| {k} | {cell(v)} |' for k, v in meta.items() if not isinstance(v, dict)]
        for name, entry in self.payload['steps'].items():
            lines += ['', f'## {name}: {entry["status"]}'
                      + (f', {entry["seconds"]} s' if entry['seconds'] is not None else '')]
            if entry.get('error'):
                lines += ['', f'**{cell(entry["error"])}**']
            for group in groups(entry['rows']):
                lines += ['', *table(group)]
        return '\n'.join(lines) + '\n'

    def save(self) -> None:
        for name, text in ((JSON_NAME, json.dumps(self.payload, indent=1, default=str)), (MD_NAME, self.markdown())):
            path = os.path.join(self.out_dir, name)
            with open(path + '.tmp', 'w', encoding='utf-8') as f:
                f.write(text)
            os.replace(path + '.tmp', path)
