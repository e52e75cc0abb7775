"""A family registered at run time passes every family-parametrised test, with no test file edited.

``tests/fifth_family.py`` builds a throwaway family (spec, model, converter, fixture files) and
registers it through ``inline_dense.registry.register`` after every adapter is imported; run as a
pytest plugin, it keeps the tests one of whose parameters names it. This test runs the suite so in
a subprocess (the registration lasts for the process) and checks that they pass and that they
are there: every test of the contract that takes a family, and more than twice as many in all.
"""
import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CONTRACT = TESTS / 'families' / 'test_contract.py'


def family_tests(path: Path) -> set[str]:
    """The tests of ``path`` that take a ``family``."""
    return {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)
            and node.name.startswith('test_') and 'family' in [a.arg for a in node.args.args]}


@pytest.mark.slow
def test_a_family_registered_at_run_time_passes_the_family_parametrised_tests(tmp_path):
    report = tmp_path / 'fifth.xml'
    # one thread, as a pytest-xdist worker of the suite computes (small tensors on shared cores); no xdist
    # worker's variables: the run is a pytest of its own
    env = {k: v for k, v in os.environ.items() if not k.startswith('PYTEST_XDIST')}
    env.update(PYTHONPATH=os.pathsep.join(filter(None, (str(TESTS), os.environ.get('PYTHONPATH')))),
               OMP_NUM_THREADS='1')
    # the end-to-end tests (compiles, exports) stay out: minutes for what the contract checks in seconds
    done = subprocess.run(
        [sys.executable, '-m', 'pytest', '-p', 'fifth_family', '-p', 'no:cacheprovider', str(TESTS), '-m', 'not slow',
         '-q', '--ignore', __file__, f'--junitxml={report}'],
        cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    outcomes = {(case.get('classname', '').rsplit('.', 1)[-1], case.get('name', '')):
                next((child.tag for child in case if child.tag in ('failure', 'error', 'skipped')), 'passed')
                for case in ET.parse(report).getroot().iter('testcase')}
    # every test of the contract that takes a family ran for it (smp's and transformers' skip where those are
    # missing) ...
    assert {name.split('[')[0] for module, name in outcomes if module == 'test_contract'} == family_tests(CONTRACT)
    # ... and the other folders' family-parametrised tests too
    passed = sorted(module for (module, _), outcome in outcomes.items() if outcome == 'passed')
    assert len(passed) > 2 * len(family_tests(CONTRACT)), done.stdout[-3000:]
    print(f'{len(passed)} tests of the run-time family passed, in {len(set(passed))} modules')
