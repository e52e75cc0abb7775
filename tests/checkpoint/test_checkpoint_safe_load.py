"""Research checkpoints load as downloaded, with no code of theirs run; malicious pickles are refused.

A crafted authors'-layout checkpoint also pickles a config object of a class that is not importable
here (a stand-in for yacs' CfgNode), an ``argparse.Namespace``, AdamW and scheduler state: it loads
without ``--trusted``. Crafted malicious pickles (``os.system``, ``eval``, ``exec``, ``subprocess``,
an unknown function, BUILD on a function ...) are refused and create no marker file.
"""
import argparse
import os
import pathlib
import pickle
import subprocess
import sys
import types

import pytest
import torch
from reference_models import VARIANTS, authors_checkpoint, build_reference_backbone

import inline_dense.openmmlab  # noqa: F401  (registers the backbones and the weights_only allow-list)
from inline_dense.checkpoint import CheckpointError, PickledObject, read_checkpoint, safe_unpickle, select_weights

TOL = 1e-4


def max_error(model, ref):
    with torch.no_grad():
        return max((out - exp).abs().max().item() for case in ref['cases']
                   for out, exp in zip(model(case['input']), case['stages']))


def fake_module(name):
    """A module that exists only while the checkpoint is written (so its classes are not importable
    when it is read)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    if '.' in name:
        sys.modules.setdefault(name.split('.')[0], types.ModuleType(name.split('.')[0]))
    return module


class Rebuilt:
    """A class whose pickle is REDUCE(class, args): constructed by calling the class."""

    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        return type(self), (self.value,)


@pytest.fixture
def research_checkpoint(tmp_path):
    """The swin fixture as a research training script saves it, plus EMA weights."""
    variant = 'inline_swin_mini'
    ckpt = torch.load(authors_checkpoint(variant), weights_only=True)
    config_module = fake_module('notinstalled_yacs.config')

    class CfgNode(dict):  # yacs' CfgNode is a dict subclass with attribute access
        pass
    CfgNode.__module__ = 'notinstalled_yacs.config'
    CfgNode.__qualname__ = 'CfgNode'
    config_module.CfgNode = CfgNode
    extra_module = fake_module('notinstalled_tools')
    Rebuilt.__module__ = 'notinstalled_tools'
    extra_module.Rebuilt = Rebuilt
    cfg = CfgNode(MODEL=CfgNode(TYPE='inline_swin', NAME='inline_swin_t'), TRAIN=CfgNode(BASE_LR=1e-3))
    cfg.frozen = True
    layer = torch.nn.Linear(4, 2)
    optimizer = torch.optim.AdamW(layer.parameters(), lr=1e-3)
    layer(torch.ones(1, 4)).sum().backward()
    optimizer.step()
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 10)
    ckpt.update(config=cfg, args=argparse.Namespace(lr=1e-3, model='inline_swin_t', epochs=300),
                optimizer=optimizer.state_dict(), lr_scheduler=scheduler.state_dict(),
                scaler=torch.amp.GradScaler('cpu').state_dict(), extra=Rebuilt(7),
                misc={'path': pathlib.PurePosixPath('/data/imagenet'), 'tags': {'a', 'b'}, 'raw': b'\x00\x01'})
    ckpt['state_dict_ema'] = ckpt['model']
    ckpt['model'] = {k: v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v
                     for k, v in ckpt['model'].items()}
    path = tmp_path / 'research.pth'
    try:
        torch.save(ckpt, path)
    finally:
        for name in ('notinstalled_yacs.config', 'notinstalled_yacs', 'notinstalled_tools'):
            del sys.modules[name]
        Rebuilt.__module__ = __name__
    return path


def test_research_checkpoint_reads_with_objects_as_data(research_checkpoint):
    with pytest.raises(pickle.UnpicklingError, match='notinstalled_yacs'):  # torch's own safe loader refuses it ...
        torch.load(research_checkpoint, weights_only=True)
    obj = read_checkpoint(str(research_checkpoint))  # ... ours reads it, no --trusted
    cfg = obj['config']
    assert isinstance(cfg, PickledObject)
    assert cfg.pickle_name == 'notinstalled_yacs.config.CfgNode'
    assert cfg['MODEL']['NAME'] == 'inline_swin_t'
    assert cfg['TRAIN']['BASE_LR'] == 1e-3
    assert cfg.frozen is True
    assert obj['args'].lr == 1e-3
    assert obj['args'].epochs == 300
    assert obj['optimizer']['param_groups'][0]['lr'] == 1e-3
    assert obj['optimizer']['state'][0]['exp_avg'].shape == (2, 4)
    assert obj['lr_scheduler']['T_max'] == 10
    assert isinstance(obj['scaler'], dict)
    assert obj['extra'].pickle_args == (7,)
    assert obj['misc']['tags'] == {'a', 'b'}
    assert obj['misc']['raw'] == b'\x00\x01'


@pytest.mark.parametrize(('weights', 'expect_match'), [('auto', True), ('ema', True), ('model', False)])
def test_research_checkpoint_loads_through_init_cfg(research_checkpoint, weights, expect_match):
    model, ref = build_reference_backbone('inline_swin_mini', str(research_checkpoint))
    if weights != 'auto':  # the init_cfg option, plumbed to the loader
        model.init_cfg = dict(model.init_cfg, weights=weights)
        model.init_weights()
    error = max_error(model.eval(), ref)
    assert (error < TOL) if expect_match else (error > 1e-2), error


def test_weights_choice_is_explicit():
    ckpt = {'model': {'w': torch.zeros(1)}, 'state_dict_ema': {'w': torch.ones(1)}}
    assert select_weights(ckpt, 'auto')[1] == "EMA weights ('state_dict_ema')"
    assert select_weights(ckpt, 'model')[1] == "model weights ('model')"
    assert select_weights({'model': {'w': torch.zeros(1)}}, 'auto')[1] == "model weights ('model')"
    with pytest.raises(CheckpointError, match=r"has no EMA weights.*weights='model'"):
        select_weights({'model': {}}, 'ema')
    with pytest.raises(ValueError, match="weights='best'"):
        select_weights(ckpt, 'best')


@pytest.mark.slow
def test_convert_tool_makes_a_slim_file_without_trust(research_checkpoint, tmp_path):
    dst = tmp_path / 'slim.pth'
    out = subprocess.run([sys.executable, 'tools/convert_checkpoint.py', str(research_checkpoint), str(dst)],
                         capture_output=True, text=True, check=True).stdout
    assert 'wrote' in out
    slim = torch.load(dst, weights_only=True)  # tensors and plain data only
    assert slim['meta']['weights'] == "EMA weights ('state_dict_ema')"
    model, ref = build_reference_backbone('inline_swin_mini', str(dst))
    assert max_error(model, ref) < TOL


# --------------------------------------------------------------------------- malicious pickles
class Payload:
    """Pickles as ``func(*args)``."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def unknown_function_payload(marker):
    module = fake_module('notinstalled_evil')

    def run(cmd):
        os.system(cmd)
    run.__module__ = 'notinstalled_evil'
    run.__qualname__ = 'run'
    module.run = run
    return Payload(run, f'touch {marker}')


PAYLOADS = {
    'os.system': lambda m: Payload(os.system, f'touch {m}'),
    'eval': lambda m: Payload(eval, f'open({str(m)!r}, "w").write("x")'),
    'exec': lambda m: Payload(exec, f'open({str(m)!r}, "w").write("x")'),
    'subprocess.Popen': lambda m: Payload(subprocess.Popen, ['touch', str(m)]),
    'subprocess.call': lambda m: Payload(subprocess.call, ['touch', str(m)]),
    'os.popen': lambda m: Payload(os.popen, f'touch {m}'),
    'importlib': lambda m: Payload(__import__('importlib').import_module, 'this_does_not_exist'),
    'torch.load': lambda m: Payload(torch.load, str(m)),
    'in a Namespace': lambda m: argparse.Namespace(lr=Payload(os.system, f'touch {m}')),
    'unknown function': unknown_function_payload,
}


@pytest.mark.parametrize('name', list(PAYLOADS))
def test_malicious_checkpoint_is_refused(name, tmp_path):
    marker = tmp_path / 'marker'
    ckpt = torch.load(authors_checkpoint(VARIANTS[0]), weights_only=True)
    ckpt['config'] = PAYLOADS[name](marker)
    path = tmp_path / 'evil.pth'
    try:
        torch.save(ckpt, path)
    finally:
        sys.modules.pop('notinstalled_evil', None)
    with pytest.raises(CheckpointError, match='refusing to load') as info:
        read_checkpoint(str(path))
    assert 'nothing of it was run' in str(info.value)
    with pytest.raises(CheckpointError, match='refusing to load'):
        build_reference_backbone(VARIANTS[0], str(path))
    assert not marker.exists()


@pytest.mark.parametrize(('data', 'fragment'), [
    (b"(S'touch MARKER'\nios\nsystem\n.", 'os.system'),                      # protocol 0 INST
    (b'cposix\nsystem\n(S\'touch MARKER\'\ntR.', 'posix.system'),           # GLOBAL + REDUCE
    (b'\x80\x04\x8c\x08builtins\x8c\x04eval\x93\x8c\x01x\x85R.',
     'builtins.eval'),                                                         # protocol 4 STACK_GLOBAL
    (b'ctorch._utils\n_rebuild_tensor_v2\n}(X\x0c\x00\x00\x00__defaults__)ub.', 'BUILD'),  # patching a function
    (b'ccopyreg\n_reconstructor\n(cnotinstalled\nThing\nctorch\nSize\nNtR.', 'copyreg._reconstructor'),
    (b'cnotinstalled_mod\nrun_it\n(S\'x\'\ntR.', 'a function, by its name'),  # unknown lower-case callable
    (b'cbuiltins\ngetattr\n(cmmengine.logging\nHistoryBuffer\nS\'register_statistics\'\ntR.', 'register_statistics'),
])
def test_crafted_pickles_are_refused(data, fragment, tmp_path):
    marker = tmp_path / 'marker'
    data = data.replace(b'MARKER', str(marker).encode())
    with pytest.raises(safe_unpickle.RefusedPickle, match=fragment.replace('.', r'\.')):
        safe_unpickle.loads(data)
    assert not marker.exists()


def test_placeholder_calls_never_reach_real_code():
    """Constructing a placeholder records its arguments; nothing importable is called or imported."""
    data = b'cnotinstalled_mod\nThing\n(S\'arg\'\ntR}(S\'k\'\nK\x01ub.'
    obj = safe_unpickle.loads(data)
    assert obj.pickle_name == 'notinstalled_mod.Thing'
    assert obj.pickle_args == ('arg',)
    assert obj.k == 1
    assert 'notinstalled_mod' not in sys.modules


def test_torchscript_archive_is_refused(tmp_path):
    path = tmp_path / 'scripted.pt'
    torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), str(path))
    with pytest.raises(CheckpointError, match='TorchScript'):
        read_checkpoint(str(path))


def test_legacy_format_reads_and_refuses_too(tmp_path):
    """torch's pre-1.6 (non-zip) format goes through the same restricted unpickler."""
    ckpt = torch.load(authors_checkpoint(VARIANTS[0]), weights_only=True)
    ckpt['args'] = argparse.Namespace(lr=3e-4)
    path = tmp_path / 'legacy.pth'
    torch.save(ckpt, path, _use_new_zipfile_serialization=False)
    assert read_checkpoint(str(path))['args'].lr == 3e-4
    marker = tmp_path / 'marker'
    ckpt['args'] = Payload(os.system, f'touch {marker}')
    torch.save(ckpt, path, _use_new_zipfile_serialization=False)
    with pytest.raises(CheckpointError, match=r'posix.system|os.system'):
        read_checkpoint(str(path))
    assert not marker.exists()
