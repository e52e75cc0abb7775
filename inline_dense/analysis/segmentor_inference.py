"""Inference of a whole segmentor at Cityscapes' size: one window over the whole image, or mmseg's
sliding windows.

A row is one UperNet at one input size, run as mmseg runs it at test time (``EncoderDecoder.inference``:
backbone, heads, logits resized to the input), from the config's model with Cityscapes' 19 classes:

- ``whole``: the whole image in one pass (mmseg's ``test_cfg=dict(mode='whole')``, its Cityscapes
  configs' test mode);
- ``slide``: SegFormer's Cityscapes test, ``mode='slide'`` with 1024x1024 windows at a stride of 768
  (three windows across a 1024x2048 image, their logits averaged where they overlap).

:data:`ROWS`: UperNet InLine-Swin-T, whole; mmseg's UperNet Swin-T, whole and slide; UperNet
InLine-DeiT-S, whole; at 1024x2048, and InLine-Swin-T whole again at 2048x4096 for the growth. Each
job runs in a fresh subprocess (:mod:`.jobs`: its own peak resident memory; the same timing loop
and memory tracker as the sweep), random weights (the time does not depend on them).

    python tools/benchmark.py --segmentor-inference --threads 1 --warmup 1 --runs 2 --rounds 2
    python tools/benchmark.py --segmentor-inference --skip 'upernet_swin-t*' 'upernet_inline-deit-s*'  # growth rows
    python -m inline_dense.analysis.segmentor_inference JOB   # one job (what each subprocess runs)
"""
import fnmatch
import os
import sys
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ..openmmlab.config_model import ConfigModel
from . import jobs, report

NUM_CLASSES = 19  # Cityscapes' evaluated classes
SLIDE_CROP, SLIDE_STRIDE = (1024, 1024), (768, 768)  # SegFormer's Cityscapes test windows
MODES = ('whole', 'slide')
# label -> config, relative to the repository root ('mmseg::' for a config mmseg ships)
CONFIGS = {
    'upernet_inline-swin-t': 'configs/upernet/upernet_inline-swin-t_8xb2-160k_ade20k-512x512.py',
    'upernet_swin-t': 'mmseg::swin/swin-tiny-patch4-window7-in1k-pre_upernet_8xb2-160k_ade20k-512x512.py',
    'upernet_inline-deit-s': 'configs/upernet/upernet_inline-deit-s_8xb2-160k_ade20k-512x512.py',
}
ROWS: tuple[tuple[str, str, tuple[int, int]], ...] = (
    ('upernet_inline-swin-t', 'whole', (1024, 2048)),
    ('upernet_swin-t', 'whole', (1024, 2048)),
    ('upernet_swin-t', 'slide', (1024, 2048)),
    ('upernet_inline-deit-s', 'whole', (1024, 2048)),
    ('upernet_inline-swin-t', 'whole', (2048, 4096)),
)


def config_path(name: str, root: str) -> str:
    """The file of :data:`CONFIGS` ``[name]``: under ``root`` (the repository), or in mmseg's package."""
    config = CONFIGS[name]
    if config.startswith('mmseg::'):
        import mmseg
        return os.path.join(os.path.dirname(mmseg.__file__), '.mim', 'configs', config[len('mmseg::'):])
    return os.path.join(root, config)


class SegmentorInference(nn.Module):
    """``forward(x)``: the (B, classes, H, W) logits of mmseg's ``EncoderDecoder.inference`` on a
    normalised (B, 3, H, W) batch, in ``mode`` 'whole' or 'slide' (windows ``crop`` (h, w), ``stride``)."""

    def __init__(self, config: str, mode: str, crop: tuple[int, int] = SLIDE_CROP,
                 stride: tuple[int, int] = SLIDE_STRIDE, num_classes: int = NUM_CLASSES) -> None:
        super().__init__()
        if mode not in MODES:
            raise ValueError(f'segmentor inference mode {mode!r}: one of {", ".join(MODES)}')
        test_cfg = dict(mode=mode, crop_size=crop, stride=stride) if mode == 'slide' else dict(mode=mode)
        options: dict[str, Any] = {'model.decode_head.num_classes': num_classes, 'model.test_cfg': test_cfg}
        self.segmentor = ConfigModel(config, options).model
        if getattr(self.segmentor, 'auxiliary_head', None) is not None:
            self.segmentor.auxiliary_head = None  # a training-only head: never run at test time

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, w = x.shape[-2:]
        metas = [dict(img_shape=(h, w), ori_shape=(h, w), pad_shape=(h, w)) for _ in range(x.shape[0])]
        return self.segmentor.inference(x, metas)


def measure(job: jobs.Job) -> dict[str, Any]:
    """The job's row (``job.mode``: 'whole' or 'slide'), measured in this process with the sweep's
    timing loop and peak-memory tracker."""
    from .memory import peak_tracker
    from .rows import latency
    from .timing import time_calls
    if job.threads:
        torch.set_num_threads(job.threads)
    if job.config is None:
        raise ValueError(f'segmentor inference job {job.label} names no config')
    device = torch.device(job.device)
    row = job.row(torch.get_num_threads())
    torch.manual_seed(0)
    model = SegmentorInference(job.config, job.mode).to(device).eval()
    x = torch.randn(job.batch, 3, job.height, job.width, device=device)

    def step() -> None:
        with torch.no_grad():
            model(x)
    tracker = peak_tracker(device)
    with tracker:
        times, cpu = time_calls(step, job.warmup, job.runs, device)
    row.times_ms = [round(t, 3) for t in times]
    row.median_ms, row.throughput = latency(times, job.batch)
    row.cpu_ms = float(torch.tensor(cpu).median())
    row.peak_mib = tracker.peak / 2 ** 20
    row.memory_method = tracker.method
    return row.to_dict()


def plan(root: str, rows: Sequence[tuple[str, str, tuple[int, int]]] = ROWS, **settings: Any) -> list[jobs.Job]:
    """A :class:`~.jobs.Job` per row (model label, mode, (h, w)); ``settings``: the other Job fields."""
    return [jobs.Job(name, h, w, mode, config=config_path(name, root), **settings) for name, mode, (h, w) in rows]


def _figure(rows: list[dict[str, Any]], model: str, mode: str, hw: tuple[int, int], key: str) -> float:
    for r in rows:
        if (r['model'], r['mode'], r['height'], r['width']) == (model, mode, *hw) and not r.get('error'):
            return float(r[key])
    return float('nan')


def ratios(rows: list[dict[str, Any]], key: str = 'median_ms') -> list[tuple[str, float, str]]:
    """(what, measured, its bound) from the rows' ``key`` (``median_ms`` wall or ``cpu_ms`` CPU time)."""
    def t(model: str, mode: str, hw: tuple[int, int] = (1024, 2048)) -> float:
        return _figure(rows, model, mode, hw, key)
    inline, swin = 'upernet_inline-swin-t', 'upernet_swin-t'
    return [
        ('1024x2048: InLine-Swin-T whole / Swin-T slide', t(inline, 'whole') / t(swin, 'slide'), '<= 0.8'),
        ('1024x2048: InLine-Swin-T whole / Swin-T whole', t(inline, 'whole') / t(swin, 'whole'), ''),
        ('InLine-Swin-T whole, 2048x4096 / 1024x2048 (4x the pixels)',
         t(inline, 'whole', (2048, 4096)) / t(inline, 'whole'), '<= 4.4'),
    ]


def print_report(rows: list[dict[str, Any]]) -> None:
    """The table of the rows, then :func:`ratios` by wall time and (one thread) by CPU time."""
    report.print_table(rows)
    print()
    for what, value, bound in ratios(rows):
        print(f'  {what}: {value:.3g}' + (f' (target {bound})' if bound else ''))
    if all(r.get('threads') == 1 for r in rows if not r.get('error')):
        print('\nthe same by process CPU time (one thread):')
        for what, value, bound in ratios(rows, 'cpu_ms'):
            print(f'  {what}: {value:.3g}' + (f' (target {bound})' if bound else ''))


def benchmark(args: Any, root: str) -> dict[str, Any]:
    """``tools/benchmark.py --segmentor-inference``: every row of :data:`ROWS` in its own subprocess,
    ``args.rounds`` times interleaved; prints the report, returns the payload (kind 'segmentor_inference')."""
    planned = [job for job in plan(root, device=args.device, batch=1, warmup=args.warmup, runs=args.runs,
                                   threads=args.threads or None)
               if not any(fnmatch.fnmatch(job.label, pat) for pat in getattr(args, 'skip', None) or ())]
    with report.JobProgress(len(planned) * args.rounds, 'segmentor inference') as bar:
        rows = jobs.run_sweep(planned, args.rounds, args.job_timeout, args.keep_freed_memory,
                              on_start=bar.note, on_done=bar.advance, worker=__name__)
    print()
    print_report(rows)
    return dict(kind='segmentor_inference', machine=report.machine_info(args.device), warmup=args.warmup,
                runs=args.runs, rounds=args.rounds, batch=1, num_classes=NUM_CLASSES,
                slide=dict(crop=list(SLIDE_CROP), stride=list(SLIDE_STRIDE)), command=' '.join(sys.argv),
                ratios=[dict(what=w, value=v, bound=b) for w, v, b in ratios(rows)],
                ratios_cpu=[dict(what=w, value=v, bound=b) for w, v, b in ratios(rows, 'cpu_ms')], results=rows)


def main(argv: Sequence[str]) -> None:
    """Subprocess end: ``python -m inline_dense.analysis.segmentor_inference JOB_JSON`` prints one RESULT row."""
    from .worker import run_worker
    if len(argv) != 1:
        sys.exit('usage: python -m inline_dense.analysis.segmentor_inference JOB_JSON')
    run_worker(argv[0], measure=measure)


if __name__ == '__main__':
    main(sys.argv[1:])
