"""The scaling figure: one plain ViT width, depth and head count, three kinds of attention, at growing inputs.

Three 12-block ViTs of InLine-DeiT-S's shape (width 320, 10 heads, MLP ratio 4, patch 16), batch 1, each
returning its last block's stride-16 map after a LayerNorm:

- ``inline-deit-s``: InLine-DeiT-S, every block global InLine attention (no cls token, as ViTDet);
- ``vitdet-softmax``: timm's ``VisionTransformerSAM`` in ViTDet's layout: 14x14 windows, global blocks
  2, 5, 8, 11, decomposed relative position bias (timm passes it to SDPA as a mask);
- ``global-softmax``: the same timm ViT with global softmax attention (SDPA, no bias) in every block.

Forward (``infer``) and forward + backward (``train``) at 512², 1024², 2048² and forward also at 4096²,
each job in a fresh subprocess (:mod:`.jobs`: its own peak resident memory, a crash or an out-of-memory
kill becomes an error row). The absolute position embeddings are resampled to each input by both
codes; timm's ViT is built at the input size so that its relative position tables fit without
interpolation.

    python tools/benchmark.py --scaling            # the full run (benchmarks/scaling_cpu.json + .png)
    python -m inline_dense.analysis.scaling JOB    # one job (what the sweep runs in each subprocess)
"""
import itertools
import math
import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ..models import InLineDeiT
from . import jobs, report

WIDTH, DEPTH, HEADS = 320, 12, 10  # InLine-DeiT-S
VITDET_GLOBAL = (2, 5, 8, 11)
VITDET_WINDOW = 14
MODELS = ('inline-deit-s', 'vitdet-softmax', 'global-softmax')
SIZES = {'infer': (512, 1024, 2048, 4096), 'train': (512, 1024, 2048)}


class TimmFeatures(nn.Module):
    """timm's ``VisionTransformerSAM`` as a backbone: (B, 3, H, W) -> its (B, C, H/16, W/16) map."""

    def __init__(self, vit: nn.Module) -> None:
        super().__init__()
        self.vit = vit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.vit.forward_features(x)


def build(name: str, hw: tuple[int, int]) -> nn.Module:
    """One of :data:`MODELS` for an input of ``hw`` (random weights)."""
    if name == 'inline-deit-s':
        return InLineDeiT('small', with_cls_token=False, out_indices=(DEPTH - 1,), drop_path_rate=0.0)
    if name not in MODELS:
        raise ValueError(f'scaling: unknown model {name!r}; one of {", ".join(MODELS)}')
    from timm.models.vision_transformer_sam import VisionTransformerSAM
    windowed = name == 'vitdet-softmax'
    if hw[0] != hw[1]:
        raise ValueError(f'scaling: {name} is measured on square inputs, got {hw[0]}x{hw[1]}')
    vit = VisionTransformerSAM(
        img_size=hw[0], patch_size=16, embed_dim=WIDTH, depth=DEPTH, num_heads=HEADS, mlp_ratio=4.0,
        qkv_bias=True, use_abs_pos=True, use_rel_pos=windowed, window_size=VITDET_WINDOW if windowed else 0,
        global_attn_indexes=VITDET_GLOBAL if windowed else tuple(range(DEPTH)), neck_chans=0, num_classes=0,
        global_pool='')
    return TimmFeatures(vit)


def measure(job: jobs.Job) -> dict[str, Any]:
    """The job's row, measured in this process (the shared timing loop and peak-memory tracker)."""
    from .memory import peak_tracker
    from .rows import latency
    from .timing import make_step, time_calls
    if job.threads:
        torch.set_num_threads(job.threads)
    device = torch.device(job.device)
    row = job.row(torch.get_num_threads())
    torch.manual_seed(0)
    model = build(job.model, (job.height, job.width)).to(device)
    x = torch.randn(job.batch, 3, job.height, job.width, device=device)
    step = make_step(model, x, job.mode)
    tracker = peak_tracker(device)
    with tracker:
        times, cpu = time_calls(step, job.warmup, job.runs, device)
    row.times_ms = [round(t, 3) for t in times]
    row.median_ms, row.throughput = latency(times, job.batch)
    row.cpu_ms = float(torch.tensor(cpu).median())
    row.peak_mib = tracker.peak / 2 ** 20
    row.memory_method = tracker.method
    return row.to_dict()


def plan(sizes: dict[str, Sequence[int]] | None = None, **settings: Any) -> list[jobs.Job]:
    """Every (model, size, mode): ``sizes`` per mode (default :data:`SIZES`), the models side by side at
    each size; ``settings``: the other :class:`~.jobs.Job` fields (device, warmup, runs, threads)."""
    sizes = SIZES if sizes is None else sizes
    return [jobs.Job(model, s, s, mode, **settings)
            for mode, sides in sizes.items() for s in sides for model in MODELS]


def _figure(rows: list[dict[str, Any]], model: str, mode: str, side: int, key: str) -> float:
    for r in rows:
        if (r['model'], r['mode'], r['height']) == (model, mode, side) and not r.get('error'):
            return float(r[key])
    return math.nan


def ratios(rows: list[dict[str, Any]], time_key: str = 'median_ms') -> list[tuple[str, float, str]]:
    """The figures the scaling run is judged by: (what, measured, its bound), the times read from
    ``time_key`` (``median_ms``, wall; or ``cpu_ms``, the process's CPU time)."""
    inline, vitdet, glob = MODELS

    def t(model: str, side: int, mode: str = 'infer') -> float:
        return _figure(rows, model, mode, side, time_key)
    return [
        ('InLine forward time 2048² / 1024²', t(inline, 2048) / t(inline, 1024), '<= 4.4'),
        ('forward at 1024²: InLine / ViTDet-layout softmax', t(inline, 1024) / t(vitdet, 1024), '<= 0.8'),
        ('forward at 1024²: InLine / global softmax', t(inline, 1024) / t(glob, 1024), '<= 0.8'),
        ('forward at 2048²: InLine / global softmax', t(inline, 2048) / t(glob, 2048), '<= 0.15'),
        ('peak memory fwd+bwd at 2048²: InLine / global softmax',
         _figure(rows, inline, 'train', 2048, 'peak_mib') / _figure(rows, glob, 'train', 2048, 'peak_mib'), '<= 1.2'),
    ]


def print_report(rows: list[dict[str, Any]]) -> None:
    """The table of every row, the growth per doubling of the side, and :func:`ratios`."""
    report.print_table(rows)
    print('\ngrowth of the forward time per doubling of the side:')
    for model in MODELS:
        sides = sorted({r['height'] for r in rows
                        if r['model'] == model and r['mode'] == 'infer' and not r.get('error')})
        times = {s: _figure(rows, model, 'infer', s, 'median_ms') for s in sides}
        steps = [f'{a}->{b}: {times[b] / times[a]:.2f}x' for a, b in itertools.pairwise(sides)]
        print(f'  {model}: ' + (', '.join(steps) or 'n/a'))
    print()
    for what, value, bound in ratios(rows):
        print(f'  {what}: {value:.3g} (bound {bound})')
    if all(r.get('threads') == 1 for r in rows if not r.get('error')):
        # one thread: its CPU time is what other processes on a shared machine do not inflate
        print('\nthe same by process CPU time (one thread):')
        for what, value, bound in ratios(rows, 'cpu_ms')[:4]:
            print(f'  {what}: {value:.3g} (bound {bound})')


def run(sizes: dict[str, Sequence[int]] | None = None, rounds: int = 1, timeout: float = 3600,
        keep_freed: bool = False, **settings: Any) -> list[dict[str, Any]]:
    """Every job of :func:`plan` in its own subprocess (``rounds`` times, interleaved); the pooled rows."""
    planned = plan(sizes, **settings)
    with report.JobProgress(len(planned) * rounds, 'scaling') as bar:
        return jobs.run_sweep(planned, rounds, timeout, keep_freed, on_start=bar.note, on_done=bar.advance,
                              worker=__name__)


def benchmark(args: Any) -> dict[str, Any]:
    """``tools/benchmark.py --scaling [SIDE ...]``: the run and its payload (kind 'scaling'), report printed.
    No sides: :data:`SIZES`; else those square sides, forward and forward + backward (``--modes``)."""
    sides = args.scaling
    sizes = SIZES if not sides else {mode: tuple(sides) for mode in args.modes}
    rows = run(sizes, rounds=args.rounds, timeout=args.job_timeout, keep_freed=args.keep_freed_memory,
               device=args.device, batch=1, warmup=args.warmup, runs=args.runs, threads=args.threads or None)
    print()
    print_report(rows)
    return dict(kind='scaling', machine=report.machine_info(args.device), warmup=args.warmup, runs=args.runs,
                rounds=args.rounds, batch=1, width=WIDTH, depth=DEPTH, heads=HEADS, command=' '.join(sys.argv),
                ratios=[dict(what=w, value=v, bound=b) for w, v, b in ratios(rows)], results=rows)


USAGE = ('usage: python -m inline_dense.analysis.scaling JOB_JSON (one job of the scaling figure, as '
         'tools/benchmark.py --scaling runs it in each subprocess); the figure itself: '
         'python tools/benchmark.py --scaling [SIDE ...]')


def main(argv: Sequence[str]) -> None:
    """Subprocess end: ``python -m inline_dense.analysis.scaling JOB_JSON`` prints one RESULT row;
    ``--help`` (or anything that is not one job as JSON) prints the usage, in one line."""
    import json

    from .worker import run_worker
    if len(argv) == 1 and argv[0] in ('-h', '--help'):
        print(USAGE)
        sys.exit(0)
    try:
        job = json.loads(argv[0]) if len(argv) == 1 else None
    except json.JSONDecodeError:
        job = None
    if not isinstance(job, dict):
        sys.exit(f'error: {" ".join(argv) or "no argument"} is not a job as JSON; {USAGE}')
    run_worker(argv[0], measure=measure)


if __name__ == '__main__':
    main(sys.argv[1:])
