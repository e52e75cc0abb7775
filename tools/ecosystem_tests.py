"""Runs timm's and smp's OWN test suites against the InLine models, for inline_* models only.

    python tools/ecosystem_tests.py --timm-tests PATH/TO/pytorch-image-models/tests/test_models.py
    python tools/ecosystem_tests.py --smp-tests PATH/TO/segmentation_models.pytorch/tests

The files are the libraries' own, from their repositories (not shipped with the wheels): take the
versions closest to the installed timm / smp. Each suite runs in a scratch folder with a
``conftest.py`` that registers the InLine models (``import inline_dense.timm`` / ``inline_dense.smp``)
before timm's file builds its parameter lists, and keeps only the cases of InLine models:

- timm: every test of ``test_models.py`` parametrised with an ``inline_*`` model, except the two
  that download weights (``test_model_load_pretrained``, ``test_model_features_pretrained``: they
  need the network; our own tests load the authors' files offline). timm sorts its models by name
  patterns: those whose ``forward_features`` gives tokens, not a map (``vit_*``, ``deit*``, ...), are
  ``NON_STD_FILTERS``, checked by the token-aware tests (``test_model_default_cfgs_non_std``) and
  left out of the map-only ones. The copied file gets the InLine ViTs (families whose head reads the
  cls token: ``inline_deit_*``) added to that list, as timm lists its own DeiTs.
- smp: ``BaseEncoderTester`` (smp's encoder contract) for the smallest variant of every family but
  the plain ViTs, which smp refuses (``tu-inline_swin_t``, ``tu-inline_pvt_t``, ``tu-inline_cswin_t``),
  with ``supports_dilated = False`` (smp's setting for encoders without dilated stages: the test then
  checks that output stride 8 / 16 is refused with a ValueError).
  smp's ``tests/utils.py`` imports GitPython only to skip slow tests on branches without a diff;
  where GitPython is missing a stand-in ``git`` module whose ``Repo`` raises is put on the path,
  so that those tests run (smp's own fallback when git fails).

Prints pytest's summary and one line per suite: passed / failed / skipped. Exit status: 0 when
nothing failed.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from inline_dense import registry  # plain data: the families

ROOT = Path(__file__).resolve().parents[1]

# timm's name patterns of models whose forward_features gives tokens (timm's ViT contract)
TOKEN_MODELS = [f'inline_{name}_*' for name, spec in registry.FAMILIES.items() if spec.head.pool == 'token']
NETWORK_TESTS = ('test_model_load_pretrained', 'test_model_features_pretrained')
# smp's decoders need maps at several strides: every family but the plain ViTs, its smallest variant
SMP_ENCODERS = tuple(f'tu-{spec.weights[0].name}' for spec in registry.FAMILIES.values() if not spec.plain)

TIMM_CONFTEST = f'''
import inline_dense.timm  # noqa: F401  (registers the models before test_models.py lists them)

NETWORK_TESTS = {NETWORK_TESTS!r}


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        name = item.name.split('[')[0]
        (keep if 'inline_' in item.name and name not in NETWORK_TESTS else drop).append(item)
    config.hook.pytest_deselected(items=drop)
    items[:] = keep
'''

SMP_TESTS = f'''
"""smp's encoder contract for the InLine encoders."""
import inline_dense.smp  # noqa: F401  (registers the models with timm)
from tests.encoders import base


class TestInLineEncoders(base.BaseEncoderTester):
    encoder_names = {list(SMP_ENCODERS)!r}
    supports_dilated = False  # strided stages only: output_stride 8 / 16 must be refused
'''

GIT_STANDIN = '''
"""Stand-in for GitPython (not installed): smp's tests/utils.py then runs every test."""


class Repo:
    def __init__(self, *args, **kwargs):
        raise RuntimeError('GitPython is not installed')
'''


def run_pytest(cwd: Path, args: list[str], extra_path: Path | None = None) -> dict[str, int]:
    env = dict(os.environ)
    paths = [str(ROOT), str(cwd)] + ([str(extra_path)] if extra_path else [])
    env['PYTHONPATH'] = os.pathsep.join([*paths, env['PYTHONPATH']] if env.get('PYTHONPATH') else paths)
    cmd = [sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-rfE',
           '-W', 'ignore::pytest.PytestUnknownMarkWarning', '--rootdir', str(cwd), *args]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    print(proc.stdout[-20000:], proc.stderr[-4000:], sep='\n')
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ''
    counts = dict.fromkeys(('passed', 'failed', 'skipped', 'error', 'deselected'), 0)
    for number, word in re.findall(r'(\d+) (passed|failed|skipped|errors?|deselected)', tail):
        counts['error' if word.startswith('error') else word] += int(number)
    if proc.returncode not in (0, 1) and not any(counts.values()):
        counts['error'] += 1  # pytest itself failed (collection, usage)
    return counts


def with_token_models(text: str) -> str:
    """timm's test file with ``TOKEN_MODELS`` in its ``NON_STD_FILTERS`` (see the module's docstring)."""
    marker = 'NON_STD_FILTERS = ['
    if marker not in text:
        raise SystemExit(f"ecosystem_tests: timm's test file has no '{marker}': is it tests/test_models.py?")
    return text.replace(marker, marker + ''.join(f'{p!r}, ' for p in TOKEN_MODELS), 1)


def timm_suite(test_file: Path, work: Path, pytest_args: list[str]) -> dict[str, int]:
    (work / 'test_models.py').write_text(with_token_models(test_file.read_text()))
    (work / 'conftest.py').write_text(TIMM_CONFTEST)
    return run_pytest(work, ['test_models.py', *pytest_args])


def smp_suite(tests_dir: Path, work: Path, pytest_args: list[str]) -> dict[str, int]:
    shutil.copytree(tests_dir, work / 'tests')
    (work / 'tests' / 'test_inline_encoders.py').write_text(SMP_TESTS)
    standin = None
    try:
        import git  # noqa: F401
    except ImportError:
        standin = work / 'standin'
        standin.mkdir()
        (standin / 'git.py').write_text(GIT_STANDIN)
    return run_pytest(work, ['tests/test_inline_encoders.py', *pytest_args], standin)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--timm-tests', type=Path, help="timm's tests/test_models.py")
    parser.add_argument('--smp-tests', type=Path, help="smp's tests/ folder (with encoders/base.py)")
    parser.add_argument('--pytest-args', default='', help='more pytest arguments, e.g. "-k torchscript -x"')
    args = parser.parse_args(argv)
    if not (args.timm_tests or args.smp_tests):
        parser.error('give --timm-tests FILE and/or --smp-tests DIR')
    if args.timm_tests and not args.timm_tests.is_file():
        parser.error(f'--timm-tests {args.timm_tests}: no such file (timm\'s tests/test_models.py)')
    if args.smp_tests and not (args.smp_tests / 'encoders' / 'base.py').is_file():
        parser.error(f'--smp-tests {args.smp_tests}: no encoders/base.py there (smp\'s tests/ folder)')
    extra = shlex.split(args.pytest_args)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.timm_tests:
            work = Path(tmp) / 'timm'
            work.mkdir()
            results['timm tests/test_models.py'] = timm_suite(args.timm_tests.resolve(), work, extra)
        if args.smp_tests:
            work = Path(tmp) / 'smp'
            work.mkdir()
            results['smp BaseEncoderTester'] = smp_suite(args.smp_tests.resolve(), work, extra)
    for suite, counts in results.items():
        print(f'{suite}: ' + ', '.join(f'{v} {k}' for k, v in counts.items()))
    return 0 if all(c['failed'] == 0 and c['error'] == 0 for c in results.values()) else 1


if __name__ == '__main__':
    sys.exit(main())
