"""The GPU check in one command, and the wheel folder it takes to a GPU machine without network.

Here (network to the package index):
    python tools/gpu_check.py --prepare gpu_wheels          # wheels + fixtures, prints the size
There (one H200, Python 3.12 with CUDA torch, no mmengine/mmcv/mmdet/mmseg, no network):
    python3 tools/gpu_check.py --wheels gpu_wheels --out OUT
CPU dry run (the same code at toy sizes, a few minutes; in the test suite):
    python tools/gpu_check.py --device cpu --dry-run --out /tmp/gpu_check

Steps: ops (mmcv ops vs mmcv 2.1.0's reference, focal loss), deform_attn (the stand-in's multi-scale
deformable attention vs mmcv's pure function; their times), attention (every InLine impl vs the CPU
reference, fp32/bf16/fp16; impl timings), backbones, detector (Mask R-CNN AMP steps), query_heads
(DINO and Mask2Former training steps on the stand-in), toy (the toy demo). Results:
OUT/gpu_check.json and OUT/gpu_check.md, rewritten after every row.
"""
import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ('ops', 'deform_attn', 'attention', 'backbones', 'detector', 'query_heads', 'toy')
# inline_dense_dev sits beside inline_dense in the checkout, outside the wheel; its gpu_check.wheels
# imports only the standard library and packaging, so it runs before the wheels are installed.
import _checkout  # noqa: E402, F401, I001  (the checkout on sys.path first)
from inline_dense_dev.gpu_check import wheels  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument('--prepare', metavar='DIR', help='fill DIR with the wheels and fixtures the GPU machine lacks, '
                                                   'then exit')
    p.add_argument('--fixtures-from', metavar='DIR', action='append',
                   help='with --prepare: where the fixtures are (default ../shared/fixtures, then tests/data/fixtures)')
    p.add_argument('--python-version', default='3.12', help="with --prepare: the GPU machine's Python (default 3.12)")
    p.add_argument('--wheels', metavar='DIR', help='install the wheels of DIR offline first, and read its fixtures')
    p.add_argument('--site', default='/tmp/inline_dense_gpu_site', help='where --wheels installs them')
    p.add_argument('--out', metavar='DIR', help='where gpu_check.json and gpu_check.md go')
    p.add_argument('--device', default='cuda', help="'cuda' (default) or 'cpu'")
    p.add_argument('--dry-run', action='store_true', help='toy sizes, one timed run each (the CPU test)')
    p.add_argument('--steps', nargs='+', choices=STEPS, default=list(STEPS), help='which steps, in order')
    p.add_argument('--fixtures', metavar='DIR', help='fixture folder (default: WHEELS/fixtures, else '
                                                    'tests/data/fixtures)')
    p.add_argument('--time-limit', type=float, default=540, help='seconds for all steps together (default 540)')
    args = p.parse_args(argv)
    if not args.prepare and not args.out:
        p.error('give --out DIR (run the check) or --prepare DIR (make the wheel folder)')
    return args


def prepare(args: argparse.Namespace) -> int:
    sources = [Path(d) for d in args.fixtures_from] if args.fixtures_from else None
    try:
        report = wheels.prepare_wheel_folder(Path(args.prepare), fixture_sources=sources, python=args.python_version)
    except wheels.WheelFolderError as err:
        print(f'[gpu_check] ERROR: {err}', file=sys.stderr)
        return 1
    print(f'[gpu_check] {report["folder"]}: {len(report["wheels"])} wheels, fixtures {report["fixtures"]}, '
          f'{report["bytes"] / 2 ** 20:.1f} MiB')
    return 0


def install(args: argparse.Namespace) -> dict:
    """Checks the carried folder's requirement closure and installs it offline; a row for the results."""
    t0 = time.time()
    python = f'{sys.version_info.major}.{sys.version_info.minor}'
    row = dict(name='wheels', folder=args.wheels, unmet=wheels.unmet_requirements(Path(args.wheels), python=python))
    res = wheels.install_offline(Path(args.wheels), Path(args.site))
    row.update(installed=res.returncode == 0, seconds=round(time.time() - t0, 1),
               ok=res.returncode == 0 and not row['unmet'])
    if res.returncode:
        row['error'] = res.stderr.strip()[-500:]
    wheels.use_site(Path(args.site))
    return row


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.time()
    if args.prepare:
        return prepare(args)
    wheel_row = install(args) if args.wheels else None
    from inline_dense_dev.gpu_check.plan import dry_run_plan, gpu_plan
    from inline_dense_dev.gpu_check.results import Results
    from inline_dense_dev.gpu_check.runner import run_check

    fixtures = args.fixtures or (os.path.join(args.wheels, wheels.FIXTURE_DIR) if args.wheels
                                 else str(ROOT / 'tests' / 'data' / 'fixtures'))
    make_plan = dry_run_plan if args.dry_run else gpu_plan
    plan = make_plan(os.path.abspath(fixtures), os.path.abspath(args.out), args.device)
    meta = dict(date=time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), python=sys.version.split()[0],
                device=args.device, dry_run=args.dry_run, time_limit_s=args.time_limit, plan=plan.to_json())
    results = Results(args.out, meta)
    if wheel_row is not None:
        results.add_row('wheels', wheel_row)
        results.finish('wheels', wheel_row['seconds'])
    extra = [args.site] if args.wheels else []
    ok = run_check(plan, args.steps, results, args.time_limit, str(ROOT), extra, started)
    print(f'[gpu_check] {"all steps passed" if ok else "some steps FAILED"} in {time.time() - started:.0f} s; '
          f'{os.path.join(args.out, "gpu_check.md")}')
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
