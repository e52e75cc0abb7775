"""What ``import inline_dense.openmmlab`` (the OpenMMLab adapter) does to mmengine, mmdet and mmseg: the
same whatever the import order, the same after importing again, and never overwriting someone else's entry.

Each order runs in a fresh interpreter (imports are once per process)."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inline_dense.registry import FAMILIES

pytestmark = pytest.mark.stack  # CI repeats its end-to-end runs on the second stack

ROOT = Path(__file__).resolve().parents[2]
OURS = {
    'MODELS': [spec.class_name for spec in FAMILIES.values()],
    'HOOKS': ['InLinePaddingMaskHook', 'AtomicCheckpointHook', 'DeterministicResumeHook'],
    'OPTIM_WRAPPERS': ['CpuAmpOptimWrapper'],
}

# Imports the modules in argv order, then prints where each registry finds our names, which
# loader reads inline://, and whether torch's safe-globals list holds mmengine's types; then does
# it all again after a second import of inline_dense.openmmlab and of its two idempotent setup steps.
PROBE = textwrap.dedent('''
    import importlib, json, sys
    import torch

    def state():
        from mmengine.runner import CheckpointLoader
        out = {}
        for module in ('mmengine.registry', 'mmdet.registry', 'mmseg.registry'):
            for registry, names in OURS.items():
                found = getattr(importlib.import_module(module), registry)
                for name in names:
                    cls = found.get(name)
                    out[f'{module}.{registry}:{name}'] = None if cls is None else f'{cls.__module__}.{cls.__name__}'
        loader = CheckpointLoader._schemes.get('inline://')
        out['CheckpointLoader:inline://'] = None if loader is None else f'{loader.__module__}.{loader.__name__}'
        # an entry is a class or (object, the name pickles give it)
        out['safe_globals'] = sorted(g[1] if isinstance(g, tuple) else f'{g.__module__}.{g.__qualname__}'
                                     for g in torch.serialization.get_safe_globals()
                                     if isinstance(g, tuple) or hasattr(g, '__qualname__'))
        return out

    OURS = json.loads(sys.argv[1])
    for name in sys.argv[2:]:
        importlib.import_module(name)
    first = state()
    import inline_dense.openmmlab
    importlib.import_module('inline_dense.openmmlab')
    from inline_dense.openmmlab.mmengine_scheme import register_mmengine_scheme
    from inline_dense.openmmlab.mmengine_types import allow_mmengine_checkpoint_types
    allow_mmengine_checkpoint_types()
    register_mmengine_scheme()
    print(json.dumps(dict(first=first, again=state())))
''')


def probe(order: list[str]) -> dict[str, dict]:
    done = subprocess.run([sys.executable, '-c', PROBE, json.dumps(OURS), *order], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope='module')
def mmdet_first() -> dict[str, dict]:
    return probe(['inline_dense.openmmlab', 'mmdet.registry', 'mmseg.registry'])


@pytest.mark.slow
def test_every_name_is_found_from_every_registry(mmdet_first):
    state = mmdet_first['first']
    for module in ('mmengine.registry', 'mmdet.registry', 'mmseg.registry'):
        for registry, names in OURS.items():
            for name in names:
                found = state[f'{module}.{registry}:{name}']
                assert found is not None, (module, registry, name, found)
                assert found.startswith('inline_dense.'), (module, registry, name, found)
                assert found.endswith(f'.{name}'), (module, registry, name, found)
    assert state['CheckpointLoader:inline://'] is not None
    assert any(g.startswith('mmengine.') for g in state['safe_globals']), state['safe_globals']


@pytest.mark.slow
def test_import_order_and_a_second_import_change_nothing(mmdet_first):
    mmseg_first = probe(['mmseg.registry', 'mmdet.registry', 'inline_dense.openmmlab'])
    assert mmdet_first['first'] == mmseg_first['first']
    assert mmdet_first['again'] == mmdet_first['first']
    assert mmseg_first['again'] == mmseg_first['first']


@pytest.mark.slow
def test_a_name_someone_else_registered_is_not_overwritten():
    """Someone else's ``InLineSwin`` in mmengine's MODELS: importing inline_dense fails, naming it."""
    code = textwrap.dedent('''
        from mmengine.registry import MODELS

        @MODELS.register_module()
        class InLineSwin:
            pass

        try:
            import inline_dense.openmmlab  # noqa: F401  (under test: it must refuse the taken name)
        except KeyError as err:
            print('refused:', err)
        print('kept:', MODELS.get('InLineSwin').__module__)
    ''')
    done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'refused:' in done.stdout, done.stdout
    assert 'InLineSwin is already registered' in done.stdout, done.stdout
    assert 'kept: __main__' in done.stdout, done.stdout
