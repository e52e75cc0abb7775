"""Time and memory of the stand-in's multi-scale deformable attention against mmcv's
``multi_scale_deformable_attn_pytorch``: one forward + backward at DINO-, Deformable-DETR- and
Mask2Former-like layouts (``--layout``, see LAYOUTS), or skewed level shapes.

    python -m inline_dense.analysis.deform_attn [--layout all --height 800 --width 1333 --runs 3 --rounds 3]
        [--before OLD.py]   # e.g. git show main:inline_dense/ops/ms_deform_attn.py > /tmp/msda_main.py

The default layout is DINO-4scale's encoder for an image of ``height`` x ``width``: levels at strides
8, 16, 32, 64, 8 heads of 32 channels, 4 points per level, every key a query. Each
implementation runs in a fresh subprocess on CPU, so that its peak resident memory (above the
process's memory after making the inputs) is its own; on CUDA the peak is torch's allocator peak.
``--before`` adds a third implementation: another stand-in file (``ops/ms_deform_attn.py``, or an
``ops/ext.py`` from before the ops were split into one module each), served to mmcv's
``MultiScaleDeformableAttnFunction`` in place of ``mmcv._ext``. The implementations take turns
(``--rounds``); the figures are medians over every timed step, in wall time and in this
process's CPU time (steadier on a machine shared with other work).
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time
from typing import Any

import torch

from .. import openmmlab  # noqa: F401  (serves mmcv._ext with the stand-in before mmcv.ops is imported)

IMPLS = ('pure', 'stand-in')


LAYOUTS = {
    # name: (level strides or explicit (h, w) shapes, queries: None = every key (an encoder), heads, points)
    'dino-enc': ((8, 16, 32, 64), None, 8, 4),
    'dino-dec': ((8, 16, 32, 64), 900, 8, 4),
    'dino5-dec': ((4, 8, 16, 32, 64), 900, 8, 4),
    'm2f-enc': ((8, 16, 32), None, 8, 4),
    'ddetr-dec': ((8, 16, 32, 64), 300, 8, 4),
    'skewed': (((200, 300), (1, 600), (600, 1)), 900, 8, 4),
}


def layout_inputs(layout: str, height: int, width: int, batch: int = 1, device: str = 'cpu',
                  seed: int = 0) -> list[torch.Tensor]:
    """(value (B, S, H, 32), spatial_shapes (L, 2), level_start_index (L,), sampling_locations
    (B, Q, H, L, P, 2), attention_weights (B, Q, H, L, P)) for ``layout`` (see LAYOUTS) at this image size."""
    levels, queries, heads, points = LAYOUTS[layout]
    rows = [list(s) if isinstance(s, tuple) else [math.ceil(height / s), math.ceil(width / s)] for s in levels]
    shapes = torch.tensor(rows)
    sizes = shapes[:, 0] * shapes[:, 1]
    start = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    keys = int(sizes.sum())
    queries = keys if queries is None else queries
    gen = torch.Generator().manual_seed(seed)
    value = torch.randn(batch, keys, heads, 32, generator=gen)
    loc = torch.rand(batch, queries, heads, len(rows), points, 2, generator=gen)
    weights = torch.rand(batch, queries, heads, len(rows), points, generator=gen).softmax(-1)
    return [t.to(device) for t in (value, shapes, start, loc, weights)]


def dino_inputs(height: int, width: int, batch: int = 1, device: str = 'cpu', seed: int = 0) -> list[torch.Tensor]:
    """DINO-4scale's encoder layout (see :func:`layout_inputs`)."""
    return layout_inputs('dino-enc', height, width, batch, device, seed)


def serve_ext(path: str) -> None:
    """Make mmcv's ``MultiScaleDeformableAttnFunction`` call the stand-in in file ``path`` (in this process)."""
    import importlib.util

    import mmcv.ops.multi_scale_deform_attn as msda
    spec = importlib.util.spec_from_file_location('deform_attn_before_ext', path)
    if spec is None or spec.loader is None:
        raise SystemExit(f'--before {path}: not a Python file; give a copy of an inline_dense/ops/ext.py')
    module = importlib.util.module_from_spec(spec)
    module.__package__ = 'inline_dense.ops'  # its relative imports (``from .checks import ...``) resolve there
    spec.loader.exec_module(module)
    msda.ext_module = module


def step(impl: str, inputs: list[torch.Tensor]) -> None:
    """One forward and backward of ``impl`` ('pure', 'stand-in' or 'before') through mmcv's entry points."""
    from mmcv.ops.multi_scale_deform_attn import MultiScaleDeformableAttnFunction, multi_scale_deformable_attn_pytorch
    value, shapes, start, loc, weights = inputs
    leaves = [t.detach().requires_grad_(True) for t in (value, loc, weights)]
    if impl == 'pure':
        out = multi_scale_deformable_attn_pytorch(leaves[0], shapes, leaves[1], leaves[2])
    else:
        out = MultiScaleDeformableAttnFunction.apply(leaves[0], shapes, start, leaves[1], leaves[2], 64)
    out.sum().backward()


def _rss_mib() -> float:
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def measure(impl: str, height: int, width: int, device: str = 'cpu', runs: int = 3,
            layout: str = 'dino-enc', before: str = '') -> dict[str, Any]:
    """In THIS process: the wall and CPU seconds of ``runs`` forward + backward steps (after one
    warm-up) and the peak memory in MiB above what the inputs took (CPU: resident; CUDA: allocator).
    ``impl`` 'before' runs the stand-in in file ``before``."""
    if impl == 'before':
        serve_ext(before)
    inputs = layout_inputs(layout, height, width, device=device)
    if device.startswith('cuda'):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _rss_mib()
    times, cpu_times = [], []
    for i in range(runs + 1):
        t, cpu = time.perf_counter(), time.process_time()
        step(impl, inputs)
        if device.startswith('cuda'):
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - t)
            cpu_times.append(time.process_time() - cpu)
    if device.startswith('cuda'):
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    return dict(impl=impl, times=times, cpu_times=cpu_times, peak_mib=peak,
                keys=int(inputs[0].shape[1]), queries=int(inputs[3].shape[1]),
                device=device, layout=layout)


def measure_in_subprocess(impl: str, height: int, width: int, device: str, runs: int,
                          layout: str = 'dino-enc', before: str = '', threads: int = 0) -> dict[str, Any]:
    """:func:`measure` in a fresh interpreter (its own peak memory), with ``threads`` torch threads (0: torch's)."""
    code = ('import json, sys, torch; from inline_dense.analysis.deform_attn import measure; '
            + (f'torch.set_num_threads({threads}); ' if threads else '') +
            f'print(json.dumps(measure({impl!r}, {height}, {width}, {device!r}, {runs}, {layout!r}, {before!r})))')
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def main(argv=None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--height', type=int, default=800, help='image height (default 800)')
    parser.add_argument('--width', type=int, default=1333, help='image width (default 1333)')
    parser.add_argument('--device', default='cpu', help='cpu or cuda (default cpu)')
    parser.add_argument('--runs', type=int, default=3, help='timed steps after one warm-up (default 3)')
    parser.add_argument('--rounds', type=int, default=1, help='turns each implementation takes, each in a fresh '
                        'process, alternating (default 1)')
    parser.add_argument('--before', default='', help='an older stand-in file (a copy of '
                        'inline_dense/ops/ms_deform_attn.py) to measure as a third implementation')
    parser.add_argument('--threads', type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument('--layout', default='dino-enc', choices=[*sorted(LAYOUTS), 'all'],
                        help='level layout (default dino-enc; all = each in turn)')
    args = parser.parse_args(argv)
    if args.before and not os.path.isfile(args.before):  # before any measuring, not in the third subprocess
        parser.error(f'--before {args.before}: no such file; give a copy of an inline_dense/ops/ext.py, e.g. '
                     f'git show main:inline_dense/ops/ext.py > /tmp/ext_main.py')
    if args.threads:
        torch.set_num_threads(args.threads)
    impls = IMPLS + (('before',) if args.before else ())
    all_rows = []
    for layout in sorted(LAYOUTS) if args.layout == 'all' else [args.layout]:
        runs: dict[str, list[dict[str, Any]]] = {impl: [] for impl in impls}
        for _ in range(args.rounds):
            for impl in impls:
                runs[impl].append(measure_in_subprocess(impl, args.height, args.width, args.device, args.runs,
                                                        layout, args.before, args.threads or 0))
        rows = []
        for impl in impls:
            first = runs[impl][0]
            row = dict(first, seconds=_median([t for r in runs[impl] for t in r['times']]),
                       cpu_seconds=_median([t for r in runs[impl] for t in r['cpu_times']]),
                       peak_mib=_median([r['peak_mib'] for r in runs[impl]]))
            print(f"{layout:>9} {impl:>9}: {row['seconds'] * 1000:8.1f} ms forward+backward "
                  f"({row['cpu_seconds'] * 1000:8.1f} ms CPU), peak {row['peak_mib']:7.1f} MiB "
                  f"({row['keys']} keys, {row['queries']} queries, {row['device']})")
            rows.append(row)
        for row in rows[1:]:
            print(f"{layout:>9} {row['impl']} / pure: time {row['seconds'] / rows[0]['seconds']:.2f}x, CPU time "
                  f"{row['cpu_seconds'] / rows[0]['cpu_seconds']:.2f}x, "
                  f"memory {row['peak_mib'] / max(rows[0]['peak_mib'], 1e-9):.2f}x", flush=True)
        all_rows += rows
    return all_rows


if __name__ == '__main__':
    main()
