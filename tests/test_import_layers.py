"""The package's import graph: no cycles, no hidden imports of a sibling package, layers top-down.

The graph is read from the source (``ast``), so an import inside a function counts as much as one
at the top of a file: a function-level import hides a cycle, it does not remove it. Importing
``inline_dense.a.b`` also runs ``inline_dense/a/__init__.py``, so that counts as an import of
``inline_dense.a`` too (except for the importer's own packages, which are already running).

Layers, top-down (a subpackage imports only from the layers below its own): the tools (outside the
package), then ``analysis`` (measuring) and ``deploy`` (exporting), which borrow nothing from each
other, then ``openmmlab`` (the adapter: everything that imports mmengine, mmcv, mmdet or mmseg:
registration, ``init_cfg``, the engine hooks and tools' pieces, the checkpoint types' installation, the
toy datasets, a whole model from a config), then the ecosystem adapters (``smp_toy`` > ``smp`` >
``timm`` / ``torchvision_detection``), then ``runtime`` / ``toy_data`` (switching the InLine evaluation,
output tensors; toy datasets on disk), then ``models`` (the public names, the classifiers, the
converter), then ``checkpoint`` (reading, finding and downloading checkpoints knows nothing about
models), then ``variants`` (the table of published variants), then ``registry`` (the list of
families), then ``families`` (one folder per family), then ``layers`` (the bricks they share), then
the leaves ``typing``, ``ops`` and ``warning_filters``.
Only ``openmmlab`` and the two floors above it import an OpenMMLab package, directly or through
another module, at module level or inside a function. ``python tests/test_import_layers.py`` prints
each subpackage's imports of its siblings.
"""
import ast
import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / 'inline_dense'

LAYERS = [
    {'analysis', 'deploy'},
    {'openmmlab'},
    {'smp_toy'},  # the ecosystem adapters (timm, smp, torchvision) sit above the models they wrap
    {'smp'},
    {'timm', 'torchvision_detection'},
    {'runtime', 'toy_data', 'torchvision_options'},  # torchvision's builder options as our settings
    {'models'},
    {'checkpoint'},
    {'variants'},  # the table of published variants, a view over the registry
    {'registry'},  # the list of families (their specs: plain data)
    {'families'},  # one folder per family: its spec, model, converter and softmax attention
    {'layers'},  # the shared bricks every family builds from
    {'typing', 'ops', 'warning_filters'},
]

class Edge(NamedTuple):
    source: str
    target: str
    path: Path
    line: int
    in_function: bool

    def where(self) -> str:
        kind = 'inside a function' if self.in_function else 'at module level'
        root = next(d for d in self.path.parents if d.name == self.source.split('.')[0])
        return f'{self.path.relative_to(root.parent)}:{self.line} ({kind})'


def module_files(package_dir: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package (``__init__`` as the package)."""
    root = package_dir.name
    out = {}
    for path in sorted(package_dir.rglob('*.py')):
        parts = list(path.relative_to(package_dir).with_suffix('').parts)
        if parts[-1] == '__init__':
            parts = parts[:-1]
        out['.'.join([root, *parts])] = path
    return out


def _imports(tree: ast.AST) -> Iterator[tuple]:
    """(node, inside a function) for every import statement."""
    def walk(node: ast.AST, in_function: bool) -> Iterator[tuple]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, in_function
            yield from walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                        ast.Lambda)))
    yield from walk(tree, False)


def import_edges(package_dir: Path) -> list[Edge]:
    """Every import of one of the package's modules by another, with the packages it runs."""
    modules = module_files(package_dir)
    root = package_dir.name
    edges = []
    for name, path in modules.items():
        is_package = path.name == '__init__.py'
        own_package = name if is_package else name.rpartition('.')[0]
        ancestors = {'.'.join(name.split('.')[:i]) for i in range(1, len(name.split('.')) + 1)}
        for node, in_function in _imports(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = own_package.split('.')[:len(own_package.split('.')) - node.level + 1]
                    base = '.'.join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ''
                for alias in node.names:
                    sub = f'{base}.{alias.name}'
                    targets.append(sub if sub in modules else base)
            for target in targets:
                if target != root and not target.startswith(root + '.'):
                    continue
                parts = target.split('.')
                # the target and the packages its import runs first, but for the importer's own
                for i in range(2, len(parts) + 1):
                    ran = '.'.join(parts[:i])
                    if ran in modules and ran not in ancestors and ran != name:
                        edges.append(Edge(name, ran, path, node.lineno, in_function))
    return edges


def cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges) per strongly connected group of modules (Tarjan)."""
    graph: dict[str, list[Edge]] = defaultdict(list)
    for edge in edges:
        graph[edge.source].append(edge)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for e in graph[v]:
            if e.target not in index:
                connect(e.target)
                low[v] = min(low[v], low[e.target])
            elif e.target in on_stack:
                low[v] = min(low[v], index[e.target])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted({e.source for e in edges} | {e.target for e in edges}):
        if v not in index:
            connect(v)
    return [_one_cycle(sorted(group)[0], group, graph) for group in groups]


def _one_cycle(start: str, group: set[str], graph: dict[str, list[Edge]]) -> list[Edge]:
    """A shortest way from ``start`` back to itself inside ``group`` (breadth first)."""
    came: dict[str, Edge | None] = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for e in graph[v]:
                if e.target not in group:
                    continue
                if e.target == start:
                    path = [e]
                    while came[path[0].source] is not None:
                        path.insert(0, came[path[0].source])
                    return path
                if e.target not in came:
                    came[e.target] = e
                    nxt.append(e.target)
        frontier = nxt
    raise AssertionError(f'no cycle through {start}')


def statements(edges: list[Edge]) -> list[Edge]:
    """One edge per import statement: its most specific target, not the packages it runs."""
    deepest: dict[tuple, Edge] = {}
    for e in edges:
        key = (e.source, e.line)
        if key not in deepest or len(e.target) > len(deepest[key].target):
            deepest[key] = e
    return list(deepest.values())


def listing(edges: list[Edge]) -> str:
    return '\n'.join(f'  {e.source} imports {e.target}  [{e.where()}]' for e in statements(edges))


def describe(cycle: list[Edge]) -> str:
    return '\n'.join([f'cycle of {len(cycle)} modules:']
                     + [f'  {e.source} imports {e.target}  [{e.where()}]' for e in cycle])


def subpackage(module: str) -> str:
    """``inline_dense.models.layers`` -> 'models'; the root package itself -> ''."""
    parts = module.split('.')
    return parts[1] if len(parts) > 1 else ''


def layer_of(sub: str) -> int:
    for i, names in enumerate(LAYERS):
        if sub in names:
            return i
    raise AssertionError(f'inline_dense.{sub} is in no layer of tests/test_import_layers.py LAYERS; add it '
                         f'where it belongs (a subpackage imports only from the layers below its own)')


def sibling_imports(edges: list[Edge]) -> dict[str, dict[str, list[Edge]]]:
    """subpackage -> imported sibling subpackage -> the imports (the root package left out)."""
    out: dict[str, dict[str, list[Edge]]] = defaultdict(lambda: defaultdict(list))
    for e in edges:
        a, b = subpackage(e.source), subpackage(e.target)
        if a and b and a != b:
            out[a][b].append(e)
    return out


@pytest.fixture(scope='module')
def edges() -> list[Edge]:
    return import_edges(PACKAGE_DIR)


def test_no_import_cycles(edges):
    found = cycles(edges)
    assert not found, '\n'.join(describe(c) for c in found)


def tool_edges(tools_dir: Path) -> list[Edge]:
    """Imports of one tool (``tools/<name>.py``, run as a script: its folder is first on sys.path) by another."""
    names = {path.stem for path in tools_dir.glob('*.py')}
    edges = []
    for path in sorted(tools_dir.glob('*.py')):
        for node, in_function in _imports(ast.parse(path.read_text(), str(path))):
            found = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module] if node.module and not node.level else [])
            edges += [Edge(f'tools.{path.stem}', f'tools.{t}', path, node.lineno, in_function)
                      for t in found if t in names]
    return edges


def test_no_import_cycles_in_the_repository():
    """Beyond the package: the development package and the tools. Nothing imports upwards across the
    three (the package imports neither; the development package imports no tool), so a cycle would lie
    inside one of them."""
    root = PACKAGE_DIR.parent
    dev = import_edges(root / 'inline_dense_dev')
    for found in (cycles(dev), cycles(tool_edges(root / 'tools'))):
        assert not found, '\n'.join(describe(c) for c in found)
    assert dev, 'no imports found in inline_dense_dev: the scan is broken'
    for package in (PACKAGE_DIR, root / 'inline_dense_dev'):
        for path in package.rglob('*.py'):
            for node, _ in _imports(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ''] if not node.level else [])
                upward = [n for n in names if n.split('.')[0] in ('tools', *(['inline_dense_dev']
                                                                             if package == PACKAGE_DIR else []))]
                assert not upward, f'{path}:{node.lineno} imports {upward}'


def test_no_function_level_import_of_a_sibling_package(edges):
    hidden = [e for e in edges if e.in_function and subpackage(e.source) != subpackage(e.target)
              and subpackage(e.source)]
    assert not hidden, ('imports of a sibling package inside a function (they hide the dependency; import at '
                        'the top of the file):\n' + listing(hidden))


def upward_imports(edges: list[Edge]) -> list[Edge]:
    """Imports of a sibling subpackage in the importer's own layer or above it."""
    return [e for a, targets in sibling_imports(edges).items() for b, found in targets.items()
            for e in found if layer_of(b) <= layer_of(a)]


def test_subpackages_import_only_lower_layers(edges):
    upward = upward_imports(edges)
    assert not upward, ('imports that do not go down the layers (analysis/deploy > openmmlab > smp_toy > smp > '
                        'timm/torchvision_detection > runtime/toy_data > models > checkpoint > variants > '
                        'registry > families > layers > typing/ops):\n' + listing(upward))


# The torch-only core: what ``from inline_dense.models import InLineSwin`` and the checkpoint
# loading run. It imports no third-party package but torch and numpy's: not OpenMMLab, not timm, not
# the adapter (``openmmlab`` is above it in LAYERS), not even inside a function.
CORE = ('', 'models', 'checkpoint', 'variants', 'registry', 'families', 'layers', 'typing')
NOT_IN_CORE = ('mmengine', 'mmcv', 'mmdet', 'mmseg', 'timm')
OPENMMLAB = ('mmengine', 'mmcv', 'mmdet', 'mmseg')
# the adapter, and the two floors that run whole OpenMMLab models through it
MAY_IMPORT_OPENMMLAB = ('openmmlab', 'deploy', 'analysis')
_IMPORT_CALLS = ('import_module', '__import__')


def _literal_prefix(node: ast.AST) -> str | None:
    """The constant text of a string argument: all of ``'a.b'``, the start of ``f'a.{x}'``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def dynamic_imports(tree: ast.AST) -> Iterator[tuple]:
    """(line, module name) of ``importlib.import_module('x')`` / ``__import__('x')`` with a literal name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ''
            name = _literal_prefix(node.args[0]) if called in _IMPORT_CALLS else None
            if name:
                yield node.lineno, name


def third_party_imports(package_dir: Path) -> list[tuple]:
    """(module, imported top-level name, line, inside a function) of every absolute import, and of
    every ``importlib.import_module`` / ``__import__`` of a literal name (counted as inside a function)."""
    root = package_dir.name
    out = []
    for name, path in module_files(package_dir).items():
        tree = ast.parse(path.read_text(), str(path))
        for node, in_function in _imports(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                names = [node.module] if node.module and not node.level else []
            out += [(name, n.split('.')[0], node.lineno, in_function) for n in names if n.split('.')[0] != root]
        out += [(name, n.split('.')[0], line, True) for line, n in dynamic_imports(tree)
                if n.split('.')[0] not in (root, '')]
    return out


def test_the_core_imports_neither_openmmlab_nor_timm():
    found = [f'{module}:{line} imports {top}' + (' (inside a function)' if in_function else '')
             for module, top, line, in_function in third_party_imports(PACKAGE_DIR)
             if subpackage(module) in CORE and top in NOT_IN_CORE]
    assert not found, (f'the torch-only core (inline_dense, .{", .".join(c for c in CORE if c)}) must import none of '
                       f'{NOT_IN_CORE}; move it to inline_dense.openmmlab:\n' + '\n'.join(found))


def openmmlab_reach(package_dir: Path) -> list[str]:
    """For each module outside :data:`MAY_IMPORT_OPENMMLAB` that imports an OpenMMLab package, itself
    or through the modules it imports (at any depth, function-level imports included): the chain."""
    direct: dict[str, tuple] = {}
    for module, top, line, in_function in third_party_imports(package_dir):
        if top in OPENMMLAB and module not in direct:
            direct[module] = (top, line, in_function)
    graph: dict[str, list[Edge]] = defaultdict(list)
    for edge in import_edges(package_dir):
        graph[edge.source].append(edge)
    found = []
    for start in module_files(package_dir):
        if subpackage(start) in MAY_IMPORT_OPENMMLAB:
            continue
        came: dict[str, Edge | None] = {start: None}
        frontier = [start]
        while frontier and not any(m in direct for m in frontier):
            frontier = [e.target for m in frontier for e in graph[m] if e.target not in came
                        and came.setdefault(e.target, e) is e]
        hit = next((m for m in frontier if m in direct), None)
        if hit is None:
            continue
        chain, node = [], hit
        while came[node] is not None:
            chain.insert(0, f'imports {node} [{came[node].where()}]')
            node = came[node].source
        top, line, in_function = direct[hit]
        where = ' (inside a function)' if in_function else ''
        found.append(' '.join([start, *chain, f'which imports {top} at line {line}{where}']))
    return found


def test_only_the_adapter_and_its_two_floors_import_openmmlab():
    """Outside ``openmmlab``, ``deploy`` and ``analysis``, no module imports mmengine, mmcv, mmdet or
    mmseg, at any depth: not itself, not inside a function, not through another module of the package."""
    found = openmmlab_reach(PACKAGE_DIR)
    assert not found, (f'modules outside inline_dense.{{{",".join(MAY_IMPORT_OPENMMLAB)}}} that import OpenMMLab '
                       '(move the OpenMMLab part into inline_dense/openmmlab/):\n  ' + '\n  '.join(found))


def test_importing_the_rest_of_the_package_loads_no_openmmlab_module():
    """The same, as Python sees it: importing every module outside the adapter and its two floors
    (``models``, ``checkpoint``, ``ops``, the timm / smp / torchvision adapters, ...) loads none of
    mmengine, mmcv, mmdet, mmseg (which are installed here)."""
    names = sorted(m for m in module_files(PACKAGE_DIR) if subpackage(m) not in MAY_IMPORT_OPENMMLAB)
    code = textwrap.dedent('''
        import importlib, json, sys
        loaded, seen = {}, set()  # the module whose import loaded them -> the OpenMMLab modules it loaded
        for name in sys.argv[1:]:
            importlib.import_module(name)
            new = sorted(m for m in sys.modules if m.split('.')[0] in %r and m not in seen)
            if new:
                loaded[name] = new
                seen.update(new)
        print(json.dumps(loaded))
    ''') % (OPENMMLAB,)
    done = subprocess.run([sys.executable, '-c', code, *names], cwd=PACKAGE_DIR.parent, capture_output=True,
                          text=True, timeout=600, env={**os.environ, 'PYTHONPATH': str(PACKAGE_DIR.parent)})
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(names) > 20, names
    assert not loaded, f'importing {len(names)} modules loaded OpenMMLab modules:\n' + '\n'.join(
        f'  import {name}: {len(found)}, e.g. {found[:5]}' for name, found in loaded.items())


SHARED_ALIASES = ('HW', 'StateDict')  # inline_dense/typing.py defines them; every other module imports them


def alias_definitions(package_dir: Path) -> list[tuple]:
    """(file, name, line) of every module-level assignment to a shared alias outside typing.py."""
    found = []
    for path in sorted(package_dir.rglob('*.py')):
        if path == package_dir / 'typing.py':
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            for target in targets:
                if isinstance(target, ast.Name) and target.id in SHARED_ALIASES:
                    found.append((str(path.relative_to(package_dir.parent)), target.id, node.lineno))
    return found


def test_shared_type_aliases_come_from_typing_only():
    copies = alias_definitions(PACKAGE_DIR)
    assert not copies, ('type aliases defined again (import them from inline_dense.typing):\n'
                        + '\n'.join(f'  {f}:{line}: {name}' for f, name, line in copies))


# ---------------------------------------------------------------- the checks themselves can fail

def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / 'pkg'
    for rel, text in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_a_cycle_through_a_function_level_import_is_found_and_named(tmp_path):
    pkg = _package(tmp_path, {
        '__init__.py': '',
        'low/__init__.py': 'from .reader import read\n',
        'low/reader.py': 'from .names import resolve\n\ndef read():\n    pass\n',
        'low/names.py': 'def resolve():\n    from .reader import read\n    return read\n',
        'high/__init__.py': '',
        'high/model.py': 'def init():\n    from ..low import read\n',
    })
    edges = import_edges(pkg)
    found = cycles(edges)
    assert len(found) == 1
    text = describe(found[0])
    assert 'pkg.low.names imports pkg.low.reader  [pkg/low/names.py:2 (inside a function)]' in text, text
    assert 'pkg.low.reader imports pkg.low.names  [pkg/low/reader.py:1 (at module level)]' in text, text
    hidden = [e for e in edges if e.in_function and subpackage(e.source) != subpackage(e.target)]
    assert [(e.source, e.target) for e in hidden] == [('pkg.high.model', 'pkg.low')]


def test_importing_a_module_runs_its_package(tmp_path):
    """``from ..low.reader import x`` runs low/__init__.py first: a cycle through it counts."""
    pkg = _package(tmp_path, {
        '__init__.py': '',
        'low/__init__.py': 'from ..high.model import init\n',
        'low/reader.py': '',
        'high/__init__.py': '',
        'high/model.py': 'from ..low.reader import x\n',
    })
    found = cycles(import_edges(pkg))
    assert [sorted(e.source for e in c) for c in found] == [['pkg.high.model', 'pkg.low']]


def test_deploy_borrowing_from_analysis_is_refused(tmp_path):
    """``deploy`` and ``analysis`` share a layer: either importing the other is an upward import;
    both may import ``runtime``."""
    pkg = _package(tmp_path, {
        '__init__.py': '',
        'runtime/__init__.py': '',
        'analysis/__init__.py': 'from ..runtime import build\n',
        'analysis/zoo.py': '',
        'deploy/__init__.py': '',
        'deploy/models.py': 'from ..runtime import build\nfrom ..analysis.zoo import ConfigModel\n',
    })
    found = {(e.source, e.target) for e in upward_imports(import_edges(pkg))}
    assert found == {('pkg.deploy.models', 'pkg.analysis'), ('pkg.deploy.models', 'pkg.analysis.zoo')}


def test_an_openmmlab_import_reached_through_another_module_is_found(tmp_path):
    """A function-level ``import mmcv`` two modules down, and ``importlib.import_module('mmdet.x')``,
    are found and the chain named; the adapter itself may import them."""
    pkg = _package(tmp_path, {
        '__init__.py': '',
        'ops/__init__.py': 'import importlib\n\ndef ext():\n    return importlib.import_module(f"mmdet.{1}")\n',
        'models/__init__.py': 'from .layers import f\n',
        'models/layers.py': 'def f():\n    import mmcv.ops\n',
        'timm.py': 'from .models import f\n',
        'openmmlab/__init__.py': 'import mmengine\nfrom ..models import f\n',
    })
    found = sorted(openmmlab_reach(pkg))
    assert found == [
        'pkg.models imports pkg.models.layers [pkg/models/__init__.py:1 (at module level)] '
        'which imports mmcv at line 2 (inside a function)',
        'pkg.models.layers which imports mmcv at line 2 (inside a function)',
        'pkg.ops which imports mmdet at line 4 (inside a function)',
        'pkg.timm imports pkg.models [pkg/timm.py:1 (at module level)] imports pkg.models.layers '
        '[pkg/models/__init__.py:1 (at module level)] which imports mmcv at line 2 (inside a function)'], found


def test_an_alias_defined_again_is_found(tmp_path):
    pkg = _package(tmp_path, {'__init__.py': '', 'typing.py': 'HW = tuple\n',
                              'sub/__init__.py': '', 'sub/m.py': 'from typing import Tuple\nHW = Tuple[int, int]\n'})
    assert alias_definitions(pkg) == [('pkg/sub/m.py', 'HW', 2)]


if __name__ == '__main__':
    for sub, targets in sorted(sibling_imports(statements(import_edges(PACKAGE_DIR))).items()):
        for target, found in sorted(targets.items()):
            names = sorted({f'{e.source.split(".", 2)[-1]} -> {e.target.split(".", 1)[-1]}' for e in found})
            print(f'{sub} -> {target}: ' + '; '.join(names))
    sys.exit(0)
