"""Latency, throughput and peak memory of backbones (or whole models) across resolutions.

Examples (see README, Performance)::

    # InLine backbones next to mmdet's softmax Swin-T / PVT-T, inference + one training step
    python tools/benchmark.py --models inline-swin-t swin-t inline-pvt-t pvt-t
    # a whole detector / segmentor from a config, inference only, two sizes
    python tools/benchmark.py --config configs/retinanet/retinanet_inline-pvt-t_fpn_1x_coco.py \\
        --modes infer --resolutions 800x1216 1600x2432
    # one InLine attention layer against its qkv + output projections alone
    python tools/benchmark.py --layer --layer-grid 200x304 --layer-dims 96 --layer-heads 3

Each (model, resolution, mode) runs in a fresh subprocess so that the peak memory
(CPU: resident set size above the level before the first step; CUDA:
``torch.cuda.max_memory_allocated``) is that measurement's alone. Latency is the
median of ``--runs`` steps after ``--warmup``; with ``--rounds K`` every job is run
K times, interleaved, and the medians are pooled (useful on a shared machine).
"""
import argparse
import fnmatch
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import inline_dense  # noqa: F401
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, ROOT)

DEFAULT_MODELS = ['inline-swin-t', 'swin-t', 'inline-pvt-t', 'pvt-t']
DEFAULT_RESOLUTIONS = ['512x512', '800x1216', '1024x1024', '1600x2432']


def parse_hw(text: str) -> Tuple[int, int]:
    try:
        h, w = (int(v) for v in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not HxW, e.g. 800x1216') from None
    if h <= 0 or w <= 0:
        raise argparse.ArgumentTypeError(f'{text!r}: sides must be positive')
    return h, w


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--models', nargs='+', default=None,
                   help=f'backbones by name (default {" ".join(DEFAULT_MODELS)}); '
                        'inline-swin-{t,s,b}, inline-pvt-{t,s,m,l} and mmdet\'s swin-*, pvt-*')
    p.add_argument('--config', nargs='+', default=[], help='mmdet/mmseg config(s) of whole models')
    p.add_argument('--resolutions', nargs='+', type=parse_hw, default=None,
                   help=f'HxW input sizes (default {" ".join(DEFAULT_RESOLUTIONS)})')
    p.add_argument('--modes', nargs='+', choices=['infer', 'train'], default=['infer', 'train'])
    p.add_argument('--device', default='cpu', help="'cpu', 'cuda' or 'cuda:N'")
    p.add_argument('--batch', type=int, default=1)
    p.add_argument('--warmup', type=int, default=2)
    p.add_argument('--runs', type=int, default=5, help='timed steps per job (median reported)')
    p.add_argument('--rounds', type=int, default=1, help='independent runs of every job, interleaved')
    p.add_argument('--threads', type=int, default=0, help='torch threads (0: torch default)')
    p.add_argument('--skip', nargs='*', default=[],
                   help="jobs to leave out, as MODEL@HxW:MODE globs, e.g. 'pvt-t@1600x2432:train'")
    p.add_argument('--keep-freed-memory', action='store_true',
                   help='glibc: keep freed blocks in the process (MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_) '
                        'so each pass does not page-fault its large activations afresh')
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
    p.add_argument('--worker', default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.models is None:
        args.models = [] if args.config else list(DEFAULT_MODELS)
    if args.resolutions is None:
        args.resolutions = [parse_hw(r) for r in DEFAULT_RESOLUTIONS]
    for name in ('batch', 'runs', 'rounds'):
        if getattr(args, name) < 1:
            p.error(f'--{name} must be >= 1')
    if args.worker is None and not args.layer and not args.replot:
        from inline_dense.analysis.benchmark import backbone_zoo
        unknown = [m for m in args.models if m not in backbone_zoo()]
        if unknown:
            p.error(f'unknown model(s) {unknown}; choose from {sorted(backbone_zoo())} or pass --config PATH')
        missing = [c for c in args.config if not os.path.isfile(c)]
        if missing:
            p.error(f'config file(s) not found: {missing}')
    return args


# ----------------------------------------------------------------------------- progress
class Progress:
    """tqdm when installed, else a one-line text bar on stderr."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.done, self.desc, self.t0 = total, 0, desc, time.time()
        try:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=desc, unit='job', dynamic_ncols=True)
        except ImportError:
            self.bar = None
            self._draw('')

    def _draw(self, note: str) -> None:
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        elapsed = time.time() - self.t0
        sys.stderr.write(f'\r{self.desc} [{"#" * filled}{"." * (width - filled)}] '
                         f'{self.done}/{self.total} {elapsed:5.0f}s {note[:40]:40s}')
        sys.stderr.flush()

    def note(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(text)
        else:
            self._draw(text)

    def update(self, n: int = 1) -> None:
        self.done += n
        if self.bar is not None:
            self.bar.update(n)
        else:
            self._draw('')

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        else:
            sys.stderr.write('\n')


# ----------------------------------------------------------------------------- jobs
def run_worker(spec_json: str) -> None:
    """Subprocess entry: one measurement, printed as a RESULT line."""
    from inline_dense.analysis.benchmark import Measurement, measure
    spec = json.loads(spec_json)
    try:
        result = measure(**spec).to_dict()
    except Exception as err:  # reported in the table instead of killing the sweep
        import traceback
        traceback.print_exc()
        label = spec['model_name'] if spec.get('config') is None else os.path.basename(spec['config'])
        result = Measurement(label, spec['height'], spec['width'], spec['mode'], spec['device'],
                             spec['batch'], spec.get('threads') or 0,
                             error=f'{type(err).__name__}: {err}').to_dict()
    print('RESULT ' + json.dumps(result), flush=True)


# glibc hands blocks above 32 MiB back to the OS when freed (and trims the heap top), so the
# next pass page-faults (and zero-fills) them again: a cost per byte that, at high
# resolution, is paid by more and more of the activations. These keep them in the process.
KEEP_FREED_ENV = {'MALLOC_MMAP_THRESHOLD_': str(2 ** 32), 'MALLOC_TRIM_THRESHOLD_': str(2 ** 36)}


def run_job(spec: Dict[str, Any], timeout: float, keep_freed: bool = False) -> Dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), '--worker', json.dumps(spec)]
    env = dict(os.environ, **KEEP_FREED_ENV) if keep_freed else None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
    except subprocess.TimeoutExpired:
        return dict(spec_error=f'timed out after {timeout:.0f}s')
    for line in proc.stdout.splitlines()[::-1]:
        if line.startswith('RESULT '):
            return json.loads(line[len('RESULT '):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    why = 'killed (out of memory?)' if proc.returncode in (-9, 137) else f'exit code {proc.returncode}'
    return dict(spec_error=f'{why}: ' + ' | '.join(tail))


def job_label(model: str, hw: Tuple[int, int], mode: str) -> str:
    return f'{model}@{hw[0]}x{hw[1]}:{mode}'


def pool(results: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Merges the rounds of one job: all times pooled, median of them, median peak memory."""
    good = [r for r in results if not r.get('error')]
    if not good:
        return results[0]
    merged = dict(good[0])
    times = [t for r in good for t in r['times_ms']]
    merged['times_ms'] = times
    merged['median_ms'] = statistics.median(times)
    merged['throughput'] = merged['batch'] * 1e3 / merged['median_ms']
    merged['peak_mib'] = statistics.median(r['peak_mib'] for r in good)
    merged['cpu_ms'] = statistics.median(r['cpu_ms'] for r in good)
    merged['peak_mib_rounds'] = [round(r['peak_mib'], 1) for r in good]
    merged['median_ms_rounds'] = [round(r['median_ms'], 2) for r in good]
    return merged


def run_sweep(args: argparse.Namespace) -> List[Dict[str, Any]]:
    entries = [(m, None) for m in args.models] + [(os.path.splitext(os.path.basename(c))[0], c)
                                                    for c in args.config]
    jobs = []
    for name, config in entries:
        for hw in args.resolutions:
            for mode in args.modes:
                label = job_label(name, hw, mode)
                if any(fnmatch.fnmatch(label, pat) for pat in args.skip):
                    continue
                jobs.append((label, dict(model_name=name, config=config, height=hw[0], width=hw[1],
                                         mode=mode, device=args.device, batch=args.batch,
                                         warmup=args.warmup, runs=args.runs, threads=args.threads or None)))
    per_job: Dict[str, List[Dict[str, Any]]] = {label: [] for label, _ in jobs}
    bar = Progress(len(jobs) * args.rounds, 'benchmark')
    for _ in range(args.rounds):
        for label, spec in jobs:
            bar.note(label)
            res = run_job(spec, args.job_timeout, args.keep_freed_memory)
            if 'spec_error' in res:
                res = dict(model=spec['model_name'], height=spec['height'], width=spec['width'],
                           mode=spec['mode'], device=spec['device'], batch=spec['batch'],
                           pixels=spec['height'] * spec['width'], times_ms=[], median_ms=math.nan,
                           throughput=math.nan, peak_mib=math.nan, cpu_ms=math.nan, error=res['spec_error'])
            per_job[label].append(res)
            bar.update()
    bar.close()
    return [pool(rs) for rs in per_job.values()]


# ----------------------------------------------------------------------------- reporting
def fmt(value: float, digits: int = 1) -> str:
    return '-' if value is None or (isinstance(value, float) and math.isnan(value)) else f'{value:.{digits}f}'


def print_table(rows: List[Dict[str, Any]]) -> None:
    mw = max([24] + [len(r['model']) for r in rows])
    head = (f'{"model":{mw}s} {"input":>10s} {"mode":>5s} {"median ms":>10s} {"img/s":>7s} {"peak MiB":>9s} '
            f'{"CPU ms":>9s}  note')
    print(head)
    print('-' * len(head))
    for r in rows:
        note = r.get('error', '')
        spread = ''
        if r.get('times_ms'):
            spread = f'min {min(r["times_ms"]):.0f} max {max(r["times_ms"]):.0f}'
        print(f'{r["model"]:{mw}s} {r["height"]:>4d}x{r["width"]:<5d} {r["mode"]:>5s} {fmt(r["median_ms"]):>10s} '
              f'{fmt(r["throughput"], 2):>7s} {fmt(r["peak_mib"]):>9s} {fmt(r.get("cpu_ms", math.nan), 0):>9s}  '
              f'{note or spread}')


def print_comparisons(rows: List[Dict[str, Any]]) -> None:
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
                    print(f'  {a:>16s} / {b:<8s} {key[0]:>4d}x{key[1]:<5d} {key[2]:>5s}: time x{fmt(ra["median_ms"] / rb["median_ms"], 2)}'
                          f'   memory x{fmt(ra["peak_mib"] / rb["peak_mib"], 2) if rb["peak_mib"] else "-"}')
    print('\nGrowth between consecutive resolutions (pixels x, time x, memory x):')
    for m in models:
        for mode in ('infer', 'train'):
            series = sorted((r for r in rows if r['model'] == m and r['mode'] == mode and not r.get('error')),
                            key=lambda r: r['pixels'])
            for lo, hi in zip(series, series[1:]):
                mem = hi['peak_mib'] / lo['peak_mib'] if lo['peak_mib'] else math.nan
                print(f'  {m:>16s} {mode:>5s} {lo["height"]}x{lo["width"]} -> {hi["height"]}x{hi["width"]}: '
                      f'pixels x{hi["pixels"] / lo["pixels"]:.2f}, time x{hi["median_ms"] / lo["median_ms"]:.2f}, '
                      f'memory x{fmt(mem, 2)}')


def plot(rows: List[Dict[str, Any]], path: str, title: str) -> None:
    """2 x modes grid: latency and peak memory against pixels, log-log, one line per model.

    An InLine model and its softmax counterpart share a colour (solid vs dashed); the dotted
    line through the InLine model's first point grows in proportion to the pixels.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    modes = [m for m in ('infer', 'train') if any(r['mode'] == m for r in rows)]
    models = list(dict.fromkeys(r['model'] for r in rows))
    families = list(dict.fromkeys(m[len('inline-'):] if m.startswith('inline-') else m for m in models))
    colours = {f: f'C{i}' for i, f in enumerate(families)}
    sizes = sorted({(r['pixels'], f'{r["height"]}x{r["width"]}') for r in rows})
    fig, axes = plt.subplots(len(modes), 2, figsize=(11, 4.2 * len(modes)), squeeze=False)
    for i, mode in enumerate(modes):
        for j, (key, label) in enumerate((('median_ms', 'latency (ms)'), ('peak_mib', 'peak memory (MiB)'))):
            ax = axes[i][j]
            for model in models:
                pts = sorted((r['pixels'], r[key]) for r in rows
                             if r['model'] == model and r['mode'] == mode and not r.get('error')
                             and r[key] and not math.isnan(r[key]))
                if not pts:
                    continue
                inline = model.startswith('inline-')
                colour = colours[model[len('inline-'):] if inline else model]
                ax.plot([p for p, _ in pts], [v for _, v in pts], '-' if inline else '--', marker='o',
                        label=model, color=colour)
                if inline:
                    p0, v0 = pts[0]
                    ax.plot([p for p, _ in pts], [v0 * p / p0 for p, _ in pts], ':', color=colour,
                            alpha=0.5, linewidth=1)
            ax.set_xscale('log')
            ax.set_yscale('log')
            ax.set_xticks([p for p, _ in sizes])
            # neighbouring sizes with similar pixel counts get their labels on a second line
            labels = [s if k == 0 or p > 1.4 * sizes[k - 1][0] else '\n' + s for k, (p, s) in enumerate(sizes)]
            ax.set_xticklabels(labels, fontsize=8)
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f'{v:g}'))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel('input size (log pixels)')
            ax.set_ylabel(label)
            ax.set_title(f'{mode}: {label.split(" (")[0]}')
            ax.grid(True, which='both', alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(title + '\n(solid: InLine, dashed: softmax; dotted: growth proportional to pixels)', fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=72)
    plt.close(fig)
    try:  # a 64-colour palette keeps the PNG small enough to commit
        from PIL import Image
        Image.open(path).convert('RGB').quantize(colors=64).save(path, optimize=True)
    except ImportError:
        pass


def machine_info(device: str) -> Dict[str, Any]:
    import torch
    info = dict(python=platform.python_version(), torch=torch.__version__, threads=torch.get_num_threads(),
                cpu=platform.processor() or platform.machine(), cores=os.cpu_count(), device=device)
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    info['cpu'] = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    if device.startswith('cuda') and torch.cuda.is_available():
        info['gpu'] = torch.cuda.get_device_name(torch.device(device))
    return info


def plot_title(payload: Dict[str, Any]) -> str:
    m = payload['machine']
    where = m.get('gpu', m['device']) if m['device'] != 'cpu' else f'{m["cpu"]}, {m["cores"]} cores'
    threads = {r.get('threads') for r in payload['results'] if r.get('threads')}
    return (f'{where}, {"/".join(str(t) for t in sorted(threads)) or m["threads"]} threads, '
            f'batch {payload["batch"]}, torch {m["torch"]}')


def default_out(kind: str, device: str) -> str:
    return os.path.join(ROOT, 'benchmarks', 'out', f'{kind}_{device.replace(":", "")}.json')


# ----------------------------------------------------------------------------- layer mode
def run_layer(args: argparse.Namespace) -> Dict[str, Any]:
    import torch
    from inline_dense.analysis.benchmark import measure_layer
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device != 'cpu':
        print('[benchmark] --layer runs on the CPU only', file=sys.stderr)
    bar = Progress(args.layer_rounds, 'layer')
    times, cpu = measure_layer(args.layer_grid, args.layer_dims, args.layer_heads, rounds=args.layer_rounds,
                          warmup=args.warmup, batch=args.batch, ablation=args.ablation,
                          progress=bar.update)
    bar.close()
    floor = statistics.median(times['qkv+proj'])
    h, w = args.layer_grid
    print(f'\nOne attention layer: {h}x{w} tokens, {args.layer_dims} channels, {args.layer_heads} heads, '
          f'batch {args.batch}, {torch.get_num_threads()} threads, {args.layer_rounds} interleaved rounds')
    cpu_floor = statistics.median(cpu['qkv+proj'])
    print(f'{"variant":24s} {"median ms":>10s} {"min":>7s} {"max":>7s} {"x qkv+proj":>11s} {"CPU ms":>8s} '
          f'{"x (CPU)":>8s}')
    rows = {}
    for name, ts in times.items():
        med, cmed = statistics.median(ts), statistics.median(cpu[name])
        rows[name] = dict(median_ms=med, times_ms=[round(t, 3) for t in ts], vs_projections=med / floor,
                          cpu_ms=cmed, cpu_vs_projections=cmed / cpu_floor)
        print(f'{name:24s} {med:10.2f} {min(ts):7.2f} {max(ts):7.2f} {med / floor:11.2f} {cmed:8.1f} '
              f'{cmed / cpu_floor:8.2f}')
    return dict(kind='layer', grid=[h, w], dims=args.layer_dims, heads=args.layer_heads, batch=args.batch,
                machine=machine_info('cpu'), results=rows)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    if args.worker is not None:
        run_worker(args.worker)
        return
    if args.replot:
        with open(args.replot) as f:
            payload = json.load(f)
        print_table(payload['results'])
        print_comparisons(payload['results'])
        png = args.plot or os.path.splitext(args.replot)[0] + '.png'
        plot(payload['results'], png, plot_title(payload))
        print(f'\nwrote {png}')
        return
    if args.layer:
        payload = run_layer(args)
        out = args.out or default_out('layer', 'cpu')
    else:
        rows = run_sweep(args)
        print()
        print_table(rows)
        print_comparisons(rows)
        payload = dict(kind='sweep', machine=machine_info(args.device), warmup=args.warmup, runs=args.runs,
                       allocator='glibc, freed memory kept' if args.keep_freed_memory else 'default',
                       rounds=args.rounds, batch=args.batch, command=' '.join(sys.argv), results=rows)
        out = args.out or default_out('sweep', args.device)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, 'w') as f:
        json.dump(payload, f, indent=1)
    print(f'\nwrote {out}')
    if not args.layer and not args.no_plot:
        png = args.plot or os.path.splitext(out)[0] + '.png'
        plot(payload['results'], png, plot_title(payload))
        print(f'wrote {png}')


if __name__ == '__main__':
    main()
