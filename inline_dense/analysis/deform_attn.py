"""Time and memory of the stand-in's multi-scale deformable attention against mmcv's
``multi_scale_deformable_attn_pytorch``: one forward + backward at a DINO-like layout.

    python -m inline_dense.analysis.deform_attn [--height 512 --width 512 --device cpu --runs 3]

The layout is DINO-4scale's encoder for an image of ``height`` x ``width``: levels at strides
8, 16, 32, 64, 8 heads of 32 channels, 4 points per level, every key a query. Each
implementation runs in a fresh subprocess on CPU, so that its peak resident memory (above the
process's memory after making the inputs) is its own; on CUDA the peak is torch's allocator peak.
"""
import argparse
import json
import math
import resource
import subprocess
import sys
import time
from typing import Dict, List

import torch

from .. import openmmlab  # noqa: F401  (serves mmcv._ext with the stand-in before mmcv.ops is imported)

IMPLS = ('pure', 'stand-in')


def dino_inputs(height: int, width: int, batch: int = 1, device: str = 'cpu', seed: int = 0) -> List[torch.Tensor]:
    """(value (B, S, 8, 32), spatial_shapes (4, 2), level_start_index (4,), sampling_locations
    (B, S, 8, 4, 4, 2), attention_weights (B, S, 8, 4, 4)) for DINO's encoder at this image size."""
    shapes = torch.tensor([[math.ceil(height / s), math.ceil(width / s)] for s in (8, 16, 32, 64)])
    sizes = shapes[:, 0] * shapes[:, 1]
    start = torch.cat([sizes.new_zeros(1), sizes.cumsum(0)[:-1]])
    keys = int(sizes.sum())
    gen = torch.Generator().manual_seed(seed)
    value = torch.randn(batch, keys, 8, 32, generator=gen)
    loc = torch.rand(batch, keys, 8, 4, 4, 2, generator=gen)
    weights = torch.rand(batch, keys, 8, 4, 4, generator=gen).softmax(-1)
    return [t.to(device) for t in (value, shapes, start, loc, weights)]


def step(impl: str, inputs: List[torch.Tensor]) -> None:
    """One forward and backward of ``impl`` ('pure' or 'stand-in') through mmcv's entry points."""
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


def measure(impl: str, height: int, width: int, device: str = 'cpu', runs: int = 3) -> Dict[str, float]:
    """In THIS process: median seconds of ``runs`` forward + backward steps (after one warm-up)
    and the peak memory in MiB above what the inputs took (CPU: resident; CUDA: allocator)."""
    inputs = dino_inputs(height, width, device=device)
    if device.startswith('cuda'):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = _rss_mib()
    times = []
    for i in range(runs + 1):
        t = time.perf_counter()
        step(impl, inputs)
        if device.startswith('cuda'):
            torch.cuda.synchronize()
        if i:
            times.append(time.perf_counter() - t)
    if device.startswith('cuda'):
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
    return dict(impl=impl, seconds=sorted(times)[len(times) // 2], peak_mib=peak,
                keys=int(inputs[0].shape[1]), device=device)


def measure_in_subprocess(impl: str, height: int, width: int, device: str, runs: int) -> Dict[str, float]:
    """:func:`measure` in a fresh interpreter (its own peak memory)."""
    code = ('import json, sys; from inline_dense.analysis.deform_attn import measure; '
            f'print(json.dumps(measure({impl!r}, {height}, {width}, {device!r}, {runs})))')
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> List[Dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--height', type=int, default=512, help='image height (default 512)')
    parser.add_argument('--width', type=int, default=512, help='image width (default 512)')
    parser.add_argument('--device', default='cpu', help='cpu or cuda (default cpu)')
    parser.add_argument('--runs', type=int, default=3, help='timed steps after one warm-up (default 3)')
    parser.add_argument('--threads', type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = [measure_in_subprocess(impl, args.height, args.width, args.device, args.runs) for impl in IMPLS]
    for row in rows:
        print(f"{row['impl']:>9}: {row['seconds'] * 1000:8.1f} ms forward+backward, peak {row['peak_mib']:7.1f} MiB "
              f"({row['keys']} keys = queries, 8 heads x 32, 4 levels x 4 points, {row['device']})")
    print(f"stand-in / pure: time {rows[1]['seconds'] / rows[0]['seconds']:.2f}x, "
          f"memory {rows[1]['peak_mib'] / max(rows[0]['peak_mib'], 1e-9):.2f}x")
    return rows


if __name__ == '__main__':
    main()
