"""Time the stand-in's CPU gradient of average RoIAlign against torchvision's loop, on the calls a
two-stage detector's RoI heads make in one training step, and check that both give the same sums.

    python -m inline_dense.analysis.roi_align [--layout all] [--height 800 --width 1333 --batch 2]
        [--channels 256 --rounds 3 --threads 1]

Layouts (mmdet's Mask R-CNN, ``SingleRoIExtractor``: one call per FPN level, strides 4 to 32, a box
going to level floor(log2(sqrt(area) / 56)) clamped to 0..3, ``sampling_ratio=0``, ``aligned=True``):
``bbox``, 512 sampled boxes per image pooled to 7x7; ``mask``, 128 positive boxes per image pooled to
14x14. Box sides are log-uniform from 8 to 512 pixels. The two take turns (``--rounds``); each figure is
the median over rounds of a step's summed calls, in this process's CPU time and in wall time.
"""
import argparse
import math
import statistics
import time
from typing import Any

import torch
import torchvision  # noqa: F401  (registers torch.ops.torchvision.*)

from ..ops.roi_align_avg_grad import roi_align_avg_backward

LAYOUTS = {'bbox': (512, 7), 'mask': (128, 14)}  # name: (boxes per image, pooled side)
STRIDES = (4, 8, 16, 32)
Shape = tuple[int, int, int, int]  # (B, C, H, W)


def level_calls(layout: str, height: int, width: int, batch: int, channels: int,
                seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor, float, Shape]]:
    """One (grad_output (K, C, P, P), rois (K, 5), spatial_scale, feature shape (B, C, H, W)) per FPN
    level that receives boxes."""
    per_image, pooled = LAYOUTS[layout]
    gen = torch.Generator().manual_seed(seed)
    count = per_image * batch
    sides = torch.exp(torch.empty(count, 2).uniform_(math.log(8), math.log(512), generator=gen))
    sides = torch.minimum(sides, torch.tensor([float(width), float(height)]))
    corner = torch.rand(count, 2, generator=gen) * (torch.tensor([float(width), float(height)]) - sides)
    index = torch.arange(batch).repeat_interleave(per_image).float()[:, None]
    rois = torch.cat([index, corner, corner + sides], dim=1)
    scale = sides.prod(dim=1).sqrt()
    level = torch.floor(torch.log2(scale / 56 + 1e-6)).clamp(0, len(STRIDES) - 1).long()
    calls = []
    for lvl, stride in enumerate(STRIDES):
        mine = rois[level == lvl]
        if mine.shape[0]:
            grad = torch.randn(mine.shape[0], channels, pooled, pooled, generator=gen)
            calls.append((grad, mine, 1.0 / stride, (batch, channels, math.ceil(height / stride),
                                                      math.ceil(width / stride))))
    return calls


def _torchvision(grad: torch.Tensor, rois: torch.Tensor, scale: float, shape: Shape) -> torch.Tensor:
    pooled = grad.shape[-1]
    return torch.ops.torchvision._roi_align_backward(grad, rois, scale, pooled, pooled, *shape, 0, True)


def _stand_in(grad: torch.Tensor, rois: torch.Tensor, scale: float, shape: Shape) -> torch.Tensor:
    return roi_align_avg_backward(grad, rois, scale, 0, True, shape)


IMPLS = {'torchvision': _torchvision, 'stand-in': _stand_in}


def measure(layout: str, height: int, width: int, batch: int, channels: int, rounds: int) -> dict[str, Any]:
    """Median CPU and wall seconds of one step's calls per implementation, and whether the sums agree."""
    calls = level_calls(layout, height, width, batch, channels)
    equal = all(torch.equal(_torchvision(*call), _stand_in(*call)) for call in calls)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in IMPLS}
    for _ in range(rounds):
        for name, impl in IMPLS.items():
            cpu, wall = time.process_time(), time.perf_counter()
            for call in calls:
                impl(*call)
            times[name].append((time.process_time() - cpu, time.perf_counter() - wall))
    return {'layout': layout, 'rois': [int(call[1].shape[0]) for call in calls], 'equal': equal,
            **{f'{name}_cpu_s': statistics.median(t[0] for t in ts) for name, ts in times.items()},
            **{f'{name}_wall_s': statistics.median(t[1] for t in ts) for name, ts in times.items()}}


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--layout', default='all', choices=[*LAYOUTS, 'all'])
    parser.add_argument('--height', type=int, default=800, help='image height (default 800)')
    parser.add_argument('--width', type=int, default=1333, help='image width (default 1333)')
    parser.add_argument('--batch', type=int, default=2, help='images per step (default 2)')
    parser.add_argument('--channels', type=int, default=256, help="FPN channels (default 256, mmdet's)")
    parser.add_argument('--rounds', type=int, default=3, help='turns each implementation takes (default 3)')
    parser.add_argument('--threads', type=int, default=1, help='torch threads (default 1)')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    layouts = list(LAYOUTS) if args.layout == 'all' else [args.layout]
    print(f'RoIAlign avg backward, {args.batch} image(s) of {args.height}x{args.width}, {args.channels} channels, '
          f'{args.threads} thread(s), median of {args.rounds} round(s); CPU ms (wall ms)')
    rows = []
    for layout in layouts:
        row = measure(layout, args.height, args.width, args.batch, args.channels, args.rounds)
        rows.append(row)
        ratio = row['stand-in_cpu_s'] / row['torchvision_cpu_s']
        print(f"{layout:>5}: boxes per level {row['rois']}: torchvision {row['torchvision_cpu_s'] * 1e3:.1f} "
              f"({row['torchvision_wall_s'] * 1e3:.1f}), stand-in {row['stand-in_cpu_s'] * 1e3:.1f} "
              f"({row['stand-in_wall_s'] * 1e3:.1f}): {ratio:.2f}x; "
              f"{'the same sums' if row['equal'] else 'SUMS DIFFER'}")
    if not all(row['equal'] for row in rows):
        raise SystemExit('the stand-in and torchvision gave different gradients')
    return rows


if __name__ == '__main__':
    main()
