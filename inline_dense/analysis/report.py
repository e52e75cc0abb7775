"""Text reports of benchmark rows, the machine they ran on, and a progress bar."""
import itertools
import math
import os
from typing import Any

import torch


def fmt(value: float | None, digits: int = 1) -> str:
    return '-' if value is None or (isinstance(value, float) and math.isnan(value)) else f'{value:.{digits}f}'


def print_table(rows: list[dict[str, Any]]) -> None:
    """One line per row: latency, throughput, peak memory, CPU time, minor page faults per step, and the
    spread or the error."""
    mw = max([24] + [len(r['model']) for r in rows])
    head = (f'{"model":{mw}s} {"input":>10s} {"mode":>5s} {"median ms":>10s} {"img/s":>7s} {"peak MiB":>9s} '
            f'{"CPU ms":>9s} {"faults":>8s}  note')
    print(head)
    print('-' * len(head))
    for r in rows:
        spread = f'min {min(r["times_ms"]):.0f} max {max(r["times_ms"]):.0f}' if r.get('times_ms') else ''
        if r.get('compile_s') is not None and r['compile_s'] == r['compile_s']:
            spread += f' (first call, compiling: {r["compile_s"]:.0f} s)'
        print(f'{r["model"]:{mw}s} {r["height"]:>4d}x{r["width"]:<5d} {r["mode"]:>5s} {fmt(r["median_ms"]):>10s} '
              f'{fmt(r["throughput"], 2):>7s} {fmt(r["peak_mib"]):>9s} {fmt(r.get("cpu_ms", math.nan), 0):>9s} '
              f'{fmt(r.get("faults_per_pass", math.nan), 0):>8s}  {r.get("error", "") or spread}')


def print_comparisons(rows: list[dict[str, Any]]) -> None:
    """InLine / softmax ratios per resolution, and growth between consecutive resolutions."""
    index = {(r['model'], r['height'], r['width'], r['mode']): r for r in rows}
    models = list(dict.fromkeys(r['model'] for r in rows))
    pairs = [(m, m[len('inline-'):]) for m in models if m.startswith('inline-') and m[len('inline-'):] in models]
    if pairs:
        print('\nInLine / softmax (time, peak memory):')
        for a, b in pairs:
            for key in sorted({(r['height'], r['width'], r['mode']) for r in rows}, key=lambda k: (k[2], k[0] * k[1])):
                ra, rb = index.get((a, *key)), index.get((b, *key))
                if ra and rb:
                    time_ratio = fmt(ra['median_ms'] / rb['median_ms'], 2)
                    memory_ratio = fmt(ra['peak_mib'] / rb['peak_mib'], 2) if rb['peak_mib'] else '-'
                    print(f'  {a:>16s} / {b:<8s} {key[0]:>4d}x{key[1]:<5d} {key[2]:>5s}: time x{time_ratio}'
                          f'   memory x{memory_ratio}')
    print('\nGrowth between consecutive resolutions (pixels x, time x, memory x):')
    for m in models:
        for mode in ('infer', 'train'):
            series = sorted((r for r in rows if r['model'] == m and r['mode'] == mode and not r.get('error')),
                            key=lambda r: r['pixels'])
            for lo, hi in itertools.pairwise(series):
                mem = hi['peak_mib'] / lo['peak_mib'] if lo['peak_mib'] else math.nan
                print(f'  {m:>16s} {mode:>5s} {lo["height"]}x{lo["width"]} -> {hi["height"]}x{hi["width"]}: '
                      f'pixels x{hi["pixels"] / lo["pixels"]:.2f}, time x{hi["median_ms"] / lo["median_ms"]:.2f}, '
                      f'memory x{fmt(mem, 2)}')


def print_layer_table(payload: dict[str, Any], rounds: int) -> None:
    """The one-layer comparison of a ``kind='layer'`` payload, as multiples of the projections."""
    h, w = payload['grid']
    print(f'\nOne attention layer: {h}x{w} tokens, {payload["dims"]} channels, {payload["heads"]} heads, '
          f'batch {payload["batch"]}, {payload["machine"]["threads"]} threads, {rounds} interleaved rounds')
    print(f'{"variant":24s} {"median ms":>10s} {"min":>7s} {"max":>7s} {"x qkv+proj":>11s} {"CPU ms":>8s} '
          f'{"x (CPU)":>8s}')
    for name, r in payload['results'].items():
        ts = r['times_ms']
        print(f'{name:24s} {r["median_ms"]:10.2f} {min(ts):7.2f} {max(ts):7.2f} {r["vs_projections"]:11.2f} '
              f'{r["cpu_ms"]:8.1f} {r["cpu_vs_projections"]:8.2f}')


def _cpu_name() -> str | None:
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return None


def machine_info(device: str) -> dict[str, Any]:
    """python, torch, threads, cpu, cores, device (and gpu on CUDA) for the JSON and the plot title.

    Versions and GPU names come from mmengine's ``collect_env``; it has no CPU model, core or
    thread count, so those three are read here.
    """
    import platform

    from mmengine.utils.dl_utils import collect_env
    env = collect_env()
    info = dict(python=env['Python'].split()[0], torch=env['PyTorch'], threads=torch.get_num_threads(),
                cpu=_cpu_name() or platform.processor() or platform.machine(), cores=os.cpu_count(),
                device=device)
    if device.startswith('cuda') and env.get('CUDA available'):
        index = str(torch.device(device).index or 0)
        for key, name in env.items():  # 'GPU 0,1': name, devices of one model grouped
            if key.startswith('GPU ') and index in key[4:].split(','):
                info['gpu'] = name
    return info


def plot_title(payload: dict[str, Any]) -> str:
    m = payload['machine']
    where = m.get('gpu', m['device']) if m['device'] != 'cpu' else f'{m["cpu"]}, {m["cores"]} cores'
    threads = {r.get('threads') for r in payload['results'] if r.get('threads')}
    return (f'{where}, {"/".join(str(t) for t in sorted(threads)) or m["threads"]} threads, '
            f'batch {payload["batch"]}, torch {m["torch"]}')


class JobProgress:
    """Progress bar on stderr (rich, which mmengine already depends on) with the running
    job's name beside it; ``note(text)`` names the job, ``advance()`` counts one done."""

    def __init__(self, total: int, desc: str) -> None:
        from rich.console import Console
        from rich.progress import MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        self._bar = Progress(*Progress.get_default_columns()[:2], MofNCompleteColumn(), TimeElapsedColumn(),
                             TextColumn('{task.fields[note]}'), console=Console(stderr=True))
        self._task = self._bar.add_task(desc, total=total, note='')

    def __enter__(self) -> 'JobProgress':
        self._bar.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._bar.stop()

    def note(self, text: str) -> None:
        self._bar.update(self._task, note=text)

    def advance(self, n: int = 1) -> None:
        self._bar.advance(self._task, n)
