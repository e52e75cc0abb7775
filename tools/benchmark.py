"""Latency, throughput and peak memory of backbones (or whole models) across resolutions.

Examples (see README, Performance)::

    # InLine backbones next to mmdet's softmax Swin-T / PVT-T, inference + one training step
    python tools/benchmark.py --models inline-swin-t swin-t inline-pvt-t pvt-t
    # a whole detector / segmentor from a config, inference only, two sizes
    python tools/benchmark.py --config configs/retinanet/retinanet_inline-pvt-t_fpn_1x_coco.py \\
        --modes infer --resolutions 800x1216 1600x2432
    # one InLine attention layer against its qkv + output projections alone
    python tools/benchmark.py --layer --layer-grid 200x304 --layer-dims 96 --layer-heads 3
    # bfloat16 next to float32 on a CPU with native bf16: GEMM rates, share of them, mmdet's Swin-T / PVT-T
    python tools/benchmark.py --models inline-swin-t swin-t inline-pvt-t pvt-t --modes infer \\
        --resolutions 800x1216 --dtype fp32 bf16 --threads 1
    # the same backbones against ONNX Runtime fp32 and OpenVINO fp32 / bf16 on the exported graph
    python tools/benchmark.py --anchors --models inline-swin-t --resolutions 800x1216 --threads 1
    # torch.compile(dynamic=True) vs eager: compile time, recompiles and speed-up, three sizes
    python tools/benchmark.py --compile --models inline-swin-t --resolutions 224x320 256x288 288x352 --batch 2
    # UperNet at Cityscapes' size: whole image vs mmseg's sliding windows (docs/performance.md)
    python tools/benchmark.py --segmentor-inference --threads 1 --warmup 1 --runs 2 --rounds 2

Each (model, resolution, mode) runs in a fresh subprocess so that the peak memory
(CPU: resident set size above the level before the first step; CUDA:
``torch.cuda.max_memory_allocated``) is that measurement's alone. Latency is the
median of ``--runs`` steps after ``--warmup``; with ``--rounds K`` every job is run
K times, interleaved, and the medians are pooled (useful on a shared machine).
With ``--dtype`` each step runs under ``torch.autocast`` (with ``--cast model``: on the model cast to that
dtype; bf16 rows only on a CPU with native bf16, :mod:`inline_dense.runtime.precision`); the tool
measures the machine's fp32 and bf16 GEMM rates at the thread count used and reports each inference row's
share of its dtype's rate (FLOPs counted per job).
"""
import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import inline_dense.openmmlab  # noqa: F401  (the mmcv ops, the backbones, hooks and inline:// for mmengine)
from inline_dense import variants
from inline_dense.analysis import jobs, report, zoo
from inline_dense.analysis.jobs import parse_hw
from inline_dense.checkpoint.atomic import OutputPathError, output_target, write_output

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='+', default=None,
                   help=f'backbones by name (default {" ".join(zoo.DEFAULT_MODELS)}); any of '
                        f'{variants.zoo_summary()} (the last ones mmdet\'s softmax backbones)')
    p.add_argument('--config', nargs='+', default=[], help='mmdet/mmseg config(s) of whole models')
    p.add_argument('--resolutions', nargs='+', type=parse_hw, default=None,
                   help=f'HxW input sizes (default {" ".join(jobs.DEFAULT_RESOLUTIONS)})')
    p.add_argument('--modes', nargs='+', choices=['infer', 'train'], default=['infer', 'train'])
    p.add_argument('--device', default='cpu', help="'cpu', 'cuda' or 'cuda:N'")
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--warmup', type=int, default=2)
    p.add_argument('--runs', type=int, default=5, help='timed steps per job (median reported)')
    p.add_argument('--rounds', type=int, default=1, help='independent runs of every job, interleaved')
    p.add_argument('--threads', type=int, default=0, help='torch threads (0: torch default)')
    p.add_argument('--dtype', nargs='+', choices=['fp32', 'bf16', 'fp16'], default=['fp32'],
                   help='precisions to run each job in (bf16 / fp16: as --cast says, torch.autocast by default); '
                        'a dtype the device has no native unit for is left out, said in one line; refused when none '
                        'is left')
    p.add_argument('--cast', nargs='+', choices=list(jobs.CASTS), default=['autocast'],
                   help='how a bf16 / fp16 job gets its dtype: autocast (torch.autocast around the float32 model) '
                        'and/or model (the model and its input cast to it, model.to(dtype); inference only; rows '
                        'labelled MODEL+bf16-model)')
    p.add_argument('--no-flops', action='store_true',
                   help='skip the FLOP count and the profiled step per inference job (the share of the GEMM rate '
                        'and of the time outside GEMMs)')
    p.add_argument('--skip', nargs='*', default=[],
                   help="jobs to leave out, as MODEL@HxW:MODE globs, e.g. 'pvt-t@1600x2432:train'")
    p.add_argument('--keep-freed-memory', action=argparse.BooleanOptionalAction, default=True,
                   help='glibc: the workers keep freed blocks in the process (MALLOC_MMAP_MAX_, '
                        'MALLOC_TRIM_THRESHOLD_), so each pass does not page-fault its large activations afresh: '
                        'the tools\' default (--no-keep-freed-memory: glibc\'s own)')
    p.add_argument('--paths', nargs='+', choices=['eager', 'compiled', 'compiled-static'], default=['eager'],
                   help='how each inference job runs: eager, and/or compiled (inline_dense.runtime.compiling: '
                        'torch.compile, inductor with freezing, dynamic sizes; the first call compiles, timed apart), '
                        'and/or compiled-static (the same with a graph for the one size measured)')
    p.add_argument('--job-timeout', type=float, default=3600, help='seconds per job before it is killed')
    p.add_argument('--out', default=None, help='JSON file (default benchmarks/out/<kind>_<device>.json)')
    p.add_argument('--plot', default=None, help='PNG file (default: the JSON path with .png)')
    p.add_argument('--no-plot', action='store_true')
    p.add_argument('--replot', default=None, metavar='JSON',
                   help='only redraw the table and plot of an earlier sweep JSON (plot next to it, or --plot)')
    p.add_argument('--layer', action='store_true',
                   help='instead: one InLine attention layer vs its qkv+output projections alone')
    p.add_argument('--layer-grid', type=parse_hw, default=(200, 304), help='token grid HxW (default 200x304)')
    p.add_argument('--layer-dims', type=int, default=96)
    p.add_argument('--layer-heads', type=int, default=3)
    p.add_argument('--layer-rounds', type=int, default=15)
    p.add_argument('--ablation', action='store_true',
                   help='--layer: also time the intermediate steps of the optimisation')
    p.add_argument('--anchors', action='store_true',
                   help='instead: each backbone in eager fp32 / bf16 (and compiled, with --paths eager compiled), '
                        'its exported ONNX graph in ONNX Runtime (fp32) and OpenVINO (fp32, bf16; extra '
                        'inline_dense[openvino]), in one process, --rounds interleaved')
    p.add_argument('--dtype-error', action='store_true',
                   help='instead: each backbone\'s outputs under autocast in each --dtype but fp32 against fp32 '
                        '(relative L2 per output, inference), weights at the scale of trained ones, in one process')
    p.add_argument('--compile', nargs='?', const='inductor', default=None, metavar='BACKEND',
                   help='instead: torch.compile(dynamic=True) with BACKEND (default inductor) vs eager, on '
                        'every resolution in turn, in one process: first-call (compile) time, graphs, speed-up')
    p.add_argument('--scaling', nargs='*', type=int, default=None, metavar='SIDE',
                   help='instead: the scaling figure (inline_dense.analysis.scaling): InLine-DeiT-S, ViTDet-layout '
                        'and global softmax ViTs of one shape at 512-2048 (4096 forward), or at the SIDEs given')
    p.add_argument('--segmentor-inference', action='store_true',
                   help='instead: UperNet inference at 1024x2048 (inline_dense.analysis.segmentor_inference): '
                        'InLine-Swin-T / InLine-DeiT-S whole image, mmseg\'s Swin-T whole and with 1024x1024 '
                        'sliding windows at stride 768; InLine-Swin-T also at 2048x4096')
    args = p.parse_args(argv)
    if args.models is None:
        args.models = [] if args.config else list(zoo.DEFAULT_MODELS)
    if args.resolutions is None:
        args.resolutions = [parse_hw(r) for r in jobs.DEFAULT_RESOLUTIONS]
    for name in ('batch', 'runs', 'rounds'):
        if getattr(args, name) < 1:
            p.error(f'--{name} must be >= 1')
    if args.compile and args.device != 'cpu':
        p.error('--compile measures on the CPU only')
    if not args.layer and not args.replot:
        problem = zoo.check_entries(args.models, args.config)
        if problem:
            p.error(problem)
    if not args.replot:
        problem = device_problem(args.device)
        if problem:
            p.error(problem)
    for flag in ('out', 'plot'):  # refused before hours of measuring, not after (checkpoint.atomic's rule)
        if getattr(args, flag):
            try:
                output_target(getattr(args, flag))
            except OutputPathError as exc:
                p.error(f'--{flag}: {exc}')
    args.dtype, why = native_dtypes(args.dtype, args.device)
    if not args.dtype:  # measuring float32 under a reduced dtype's name would be a wrong result
        p.error(f'--dtype {why}')
    if 'model' in args.cast:
        other = [f'--{name.replace("_", "-")}' for name in ('compile', 'scaling', 'anchors', 'dtype_error',
                                                           'segmentor_inference', 'layer')
                 if getattr(args, name) not in (None, False)]
        if other:
            p.error(f'--cast model is an option of the sweep; {other[0]} measures its own way: leave --cast out')
        if args.dtype == ['fp32']:
            p.error('--cast model casts the model to a reduced dtype, and only fp32 is left to measure: add '
                    '--dtype bf16 (or fp16), one this device runs natively')
    if args.dtype_error and args.dtype == ['fp32']:
        reduced, _ = native_dtypes(['bf16', 'fp16'], args.device, quiet=True)
        p.error('--dtype-error compares a reduced precision with fp32: ' + (
            f'add --dtype {" ".join(reduced)}' if reduced else
            f'{args.device} runs none natively here ({why or "no --dtype but fp32 given"}), so there is nothing '
            f'to compare'))
    return args


def device_problem(device: str) -> str | None:
    """Why ``--device`` cannot be measured on here, or None."""
    import torch
    try:
        dev = torch.device(device)
    except RuntimeError:
        return f"--device {device!r} is not a device; give 'cpu', 'cuda' or 'cuda:N'"
    if dev.type == 'cuda':
        if not torch.cuda.is_available():
            return (f'--device {device}: torch {torch.__version__} sees no CUDA GPU here, so nothing could be '
                    f'measured; use --device cpu, or run on a machine with a GPU')
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            return f'--device {device}: this machine has {torch.cuda.device_count()} CUDA GPU(s), numbered from 0'
    elif dev.type != 'cpu':
        return f"--device {device}: the benchmark measures 'cpu' or 'cuda' only"
    return None


def native_dtypes(names: Sequence[str], device: str, quiet: bool = False) -> tuple[list[str], str]:
    """The requested dtypes the device runs natively (one line on stderr for each left out, unless
    ``quiet``), and why the first left out was (empty when none was)."""
    from inline_dense.runtime.precision import check_dtype, parse_dtype
    kept, first = [], ''
    for name in dict.fromkeys(names):
        why = check_dtype(parse_dtype(name), device)
        if not why:
            kept.append(name)
            continue
        first = first or f'{name}: {why}'
        if not quiet:
            print(f'[benchmark] --dtype {name} left out: {why}', file=sys.stderr)
    return kept, first


def default_out(kind: str, device: str) -> str:
    return os.path.join(ROOT, 'benchmarks', 'out', f'{kind}_{device.replace(":", "")}.json')


def plan_sweep(args: argparse.Namespace) -> list[jobs.Job]:
    """The sweep's jobs: every path, dtype, cast (reduced dtypes only), model, resolution and mode, but the
    training steps of the compiled paths and of a model cast to a reduced dtype (inference only)."""
    planned = [job for path in args.paths for dtype in args.dtype
               for cast in (args.cast if dtype != 'fp32' else ['autocast'])
               for job in jobs.plan_jobs(zoo.model_entries(args.models, args.config), args.resolutions, args.modes,
                                         args.skip, device=args.device, batch=args.batch, warmup=args.warmup,
                                         runs=args.runs, threads=args.threads or None, dtype=dtype,
                                         flops=not args.no_flops, path=path, profile=not args.no_flops, cast=cast)]
    return [job for job in planned if job.mode == 'infer' or (job.path == 'eager' and job.cast == 'autocast')]


def run_sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Every (model, resolution, mode) in its own subprocess; prints the tables, returns the payload."""
    from inline_dense.analysis import gemm
    planned = plan_sweep(args)
    rates = gemm.gemm_rates(list(dict.fromkeys(['fp32', *args.dtype])), args.threads or None, device=args.device)
    print(gemm.format_rates(rates), flush=True)
    with report.JobProgress(len(planned) * args.rounds, 'benchmark') as bar:
        rows = jobs.run_sweep(planned, args.rounds, args.job_timeout, args.keep_freed_memory,
                              on_start=bar.note, on_done=bar.advance)
    print()
    report.print_table(rows)
    report.print_comparisons(rows)
    shares = gemm.share_rows(rows, rates)
    if shares:
        print(f'\nShare of the machine\'s GEMM rate ({gemm.format_rates(rates)}):')
        print(gemm.format_shares(shares))
    return dict(kind='sweep', machine=report.machine_info(args.device), warmup=args.warmup, runs=args.runs,
                allocator='glibc, freed memory kept' if args.keep_freed_memory else 'default',
                rounds=args.rounds, batch=args.batch, command=' '.join(sys.argv), gemm=rates, results=rows)


def run_layer(args: argparse.Namespace) -> dict[str, Any]:
    """One InLine attention layer and its variants, interleaved; prints the table, returns the payload."""
    import torch

    from inline_dense.analysis.ablation import layer_rows, measure_layer
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device != 'cpu':
        print('[benchmark] --layer runs on the CPU only', file=sys.stderr)
    with report.JobProgress(args.layer_rounds, 'layer') as bar:
        wall, cpu = measure_layer(args.layer_grid, args.layer_dims, args.layer_heads, rounds=args.layer_rounds,
                                  warmup=args.warmup, batch=args.batch, ablation=args.ablation,
                                  progress=bar.advance)
    payload = dict(kind='layer', grid=list(args.layer_grid), dims=args.layer_dims, heads=args.layer_heads,
                   batch=args.batch, machine=report.machine_info('cpu'), results=layer_rows(wall, cpu))
    report.print_layer_table(payload, args.layer_rounds)
    return payload


def run_compile(args: argparse.Namespace) -> dict[str, Any]:
    """Each model compiled once, run on every resolution; prints the table, returns the payload."""
    import torch

    from inline_dense.analysis.compiled import format_compile_rows, measure_compiled
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = []
    for name, config in zoo.model_entries(args.models, args.config):
        model = zoo.build_model(name if config is None else None, config)
        zoo.init_model(model)
        shapes = [(args.batch, 3, h, w) for h, w in args.resolutions]
        for mode in args.modes:
            rows += measure_compiled(name, model, shapes, mode, args.compile, args.warmup, args.runs)
            print(format_compile_rows(rows[-len(shapes):]), flush=True)
    print()
    print(format_compile_rows(rows))
    return dict(kind='compile', machine=report.machine_info(args.device), warmup=args.warmup, runs=args.runs,
                batch=args.batch, command=' '.join(sys.argv), results=[r.as_dict() for r in rows])


def backbone_models(args: argparse.Namespace, flag: str) -> Iterator[tuple[str, Any]]:
    """The backbones of ``--models``, each built and initialised after seeding 0; a ``--config`` model
    is left out with one line (``flag`` measures backbones only)."""
    import torch
    for name, config in zoo.model_entries(args.models, args.config):
        if config is not None:
            print(f'[benchmark] {flag}: {name} left out (backbones only)', file=sys.stderr)
            continue
        torch.manual_seed(0)
        model = zoo.build_model(name)
        zoo.init_model(model)
        yield name, model


def run_anchors(args: argparse.Namespace) -> dict[str, Any]:
    """Every backbone and resolution against its ONNX Runtime / OpenVINO anchors; prints, returns the payload."""
    import torch

    from inline_dense.analysis import gemm
    from inline_dense.deploy.anchors import anchor_rows, format_anchor_rows
    from inline_dense.runtime.allocator import tool_default
    # One process for every runtime: it gets the tools' allocator (unless --no-keep-freed-memory), as the
    # tools' own CPU runs do; ONNX Runtime and OpenVINO allocate through their own arenas.
    kept = args.keep_freed_memory and tool_default('cpu')
    print(f'[benchmark] allocator: {"glibc, freed memory kept" if kept else "default"}', flush=True)
    threads = args.threads or torch.get_num_threads()
    rates = gemm.gemm_rates(['fp32', *[d for d in args.dtype if d != 'fp32']], threads)
    print(gemm.format_rates(rates), flush=True)
    results = []
    for name, model in backbone_models(args, '--anchors'):
        for hw in args.resolutions:
            rows = anchor_rows(model, hw, threads, warmup=args.warmup, runs=args.runs, rounds=args.rounds,
                               compiled=[jobs.COMPILED_PATHS[path] for path in args.paths if path != 'eager'])
            print(format_anchor_rows(name, hw, rows), flush=True)
            results.append(dict(model=name, height=hw[0], width=hw[1], threads=threads, rows=rows))
    return dict(kind='anchors', machine=report.machine_info('cpu'), gemm=rates, warmup=args.warmup, runs=args.runs,
                allocator='glibc, freed memory kept' if kept else 'default', command=' '.join(sys.argv),
                results=results)


def run_dtype_error(args: argparse.Namespace) -> dict[str, Any]:
    """Every backbone, resolution and reduced dtype: its outputs' error against float32; prints, returns the payload."""
    import torch

    from inline_dense.runtime.precision import autocast_errors, parse_dtype, trained_scale_
    if args.threads:
        torch.set_num_threads(args.threads)
    reduced = [d for d in args.dtype if d != 'fp32']  # at least one (parse_args)
    results = []
    for name, model in backbone_models(args, '--dtype-error'):
        trained_scale_(model).eval()
        for h, w in args.resolutions:
            x = torch.randn(args.batch, 3, h, w, generator=torch.Generator().manual_seed(0))
            for dtype in reduced:
                errs = autocast_errors(model, x, parse_dtype(dtype))
                print(f'{name} {h}x{w} {dtype}: relative L2 against fp32 per output '
                      f'{" ".join(f"{e:.2e}" for e in errs)} (max {max(errs):.2e})', flush=True)
                results.append(dict(model=name, height=h, width=w, dtype=dtype, rel_l2=errs, max_rel_l2=max(errs)))
    return dict(kind='dtype_error', machine=report.machine_info('cpu'), batch=args.batch,
                weights='trained scale (Xavier uniform, biases std 0.1)', command=' '.join(sys.argv), results=results)


def write_plot(rows: Any, png: str, payload: dict[str, Any]) -> None:
    from inline_dense.analysis.plot import plot
    plot(rows, png, report.plot_title(payload))


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the tool; the exit status: 0, or 1 when every row of the table is a failure (then nothing is written)."""
    args = parse_args(argv)
    if args.replot:
        with open(args.replot) as f:
            payload = json.load(f)
        why = nothing_measured(payload['results'])
        if why:
            print(f'[benchmark] --replot {args.replot}: nothing to plot, the file holds no measurement: {why}',
                  file=sys.stderr)
            return 1
        report.print_table(payload['results'])
        report.print_comparisons(payload['results'])
        png = args.plot or os.path.splitext(args.replot)[0] + '.png'
        write_plot(payload['results'], png, payload)
        print(f'\nwrote {png}')
        return 0
    if args.compile:
        payload = run_compile(args)
    elif args.scaling is not None:
        from inline_dense.analysis import scaling
        payload = scaling.benchmark(args)
    elif args.anchors:
        payload = run_anchors(args)
    elif args.dtype_error:
        payload = run_dtype_error(args)
    elif args.segmentor_inference:
        from inline_dense.analysis import segmentor_inference
        payload = segmentor_inference.benchmark(args, ROOT)
        args.no_plot = True  # five rows, two inference modes: the table says it; no sweep figure
    else:
        payload = run_layer(args) if args.layer else run_sweep(args)
    out = args.out or default_out(payload['kind'], 'cpu' if args.layer else args.device)
    why = nothing_measured(payload['results'])
    if why:  # an earlier sweep's JSON and plot stay as they were
        print(f'[benchmark] FAILED: nothing was measured: {why}; {out} was left unchanged', file=sys.stderr)
        return 1
    write_output(out, json.dumps(payload, indent=1))
    print(f'\nwrote {out}')
    if not (args.layer or args.compile or args.anchors or args.dtype_error or args.no_plot):
        png = args.plot or os.path.splitext(out)[0] + '.png'
        write_plot(payload['results'], png, payload)
        print(f'wrote {png}')
    return 0


def nothing_measured(results: Any) -> str | None:
    """Why a payload's ``results`` hold no measurement (every row failed, or there is none), or None."""
    rows = list(results.values()) if isinstance(results, dict) else list(results)  # --layer: rows by name
    failed = [r for r in rows if r.get('error')]
    if len(failed) < len(rows):
        return None
    return f'every job failed (first: {failed[0]["error"]})' if failed else 'no job was left to run (--skip?)'


if __name__ == '__main__':
    sys.exit(main())
