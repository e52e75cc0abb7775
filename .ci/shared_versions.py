"""The two stacks' environments share everything but the stack: ``python shared_versions.py PY_A PY_B``.

PY_A and PY_B are the Pythons of two environments set up with different stacks. Checked: every
distribution pyproject.toml names outside the stack extras (the core's requirements, the other extras,
the ``dev`` group: torch, timm, smp, torchvision, transformers, onnx, ...) is installed in both or in
neither, and every distribution installed in both is at the same version. So a test that imports no
OpenMMLab package runs the same code on both stacks, and ``.ci/other_stack.sh`` runs such tests once, on
the default stack. Prints one summary line when they agree; otherwise a line per difference and how to fix
them, and exits non-zero.
"""
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

STACK_EXTRAS = ('mm', 'lite', 'full', 'onedl')
LIST = ('import importlib.metadata as m, json; '
        'print(json.dumps({d.metadata["Name"]: d.version for d in m.distributions()}))')


def canonical(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def outside_the_stack(pyproject: dict) -> set[str]:
    """The distributions pyproject.toml names outside the stack extras, this package's own extras excluded."""
    project = pyproject['project']
    requirements = list(project['dependencies'])
    for extra, reqs in project['optional-dependencies'].items():
        if extra not in STACK_EXTRAS:
            requirements += reqs
    for reqs in pyproject.get('dependency-groups', {}).values():
        requirements += [r for r in reqs if isinstance(r, str)]
    names = {canonical(re.match(r'[A-Za-z0-9][A-Za-z0-9._-]*', r).group()) for r in requirements}
    return names - {canonical(project['name'])}


def installed(python: str) -> dict[str, str]:
    out = subprocess.run([python, '-I', '-c', LIST], check=True, capture_output=True, text=True).stdout
    return {canonical(name): version for name, version in json.loads(out).items()}


def main() -> int:
    py_a, py_b = sys.argv[1:3]
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / 'pyproject.toml').read_text())
    a, b = installed(py_a), installed(py_b)
    problems = [f'{name}: installed in {py_a if name in a else py_b} only'
                for name in sorted(outside_the_stack(pyproject)) if (name in a) != (name in b)]
    problems += [f'{name}: {a[name]} in {py_a}, {b[name]} in {py_b}'
                 for name in sorted(a.keys() & b.keys()) if a[name] != b[name]]
    if problems:
        print('[shared-versions] ERROR: the stacks\' environments differ outside the stack, so the tests run '
              'once would not be the same on both:', *problems, sep='\n  ')
        print('  -> pin them alike in uv.lock (uv lock), or run the whole suite on both stacks '
              '(.ci/other_stack.sh)')
        return 1
    print(f'[shared-versions] ok: {len(a.keys() & b.keys())} distributions in both environments at one version, '
          f'{len(a.keys() ^ b.keys())} in one only (the stacks\')')
    return 0


if __name__ == '__main__':
    sys.exit(main())
