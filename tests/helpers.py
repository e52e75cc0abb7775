"""Helpers several test modules import: small backbones, the tools as modules, configs read once.

(``conftest.py`` holds the fixtures and the suite's settings; test modules import from here, never
from ``conftest``.)"""
import copy
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from inline_dense import registry

ROOT = Path(__file__).resolve().parents[1]

# Per family of the registry: class name, and its spec's tiny settings, with every kind of block
# (InLine, softmax, a mixed stage).
TINY: dict[str, tuple[str, dict[str, Any]]] = {name: (spec.class_name, dict(spec.tiny))
                                               for name, spec in registry.FAMILIES.items()}
TINY_KINDS = tuple(TINY)
# Each family's smallest published variant (its inline:// and timm name), and that variant narrowed to
# the family's tiny widths (its attention layout kept): the adapters' tests build these.
SMALLEST: dict[str, str] = {name: spec.weights[0].name for name, spec in registry.FAMILIES.items()}
NARROW: dict[str, dict[str, Any]] = {spec.weights[0].name: {k: spec.tiny[k] for k in ('embed_dims', 'num_heads')}
                                     for spec in registry.FAMILIES.values()}
# ... with one block per stage (``depths``; a plain ViT's stages are its blocks: four, ``depth``): the adapters'
# contract, quickly.
SHALLOW: dict[str, dict[str, Any]] = {
    spec.weights[0].name: dict(NARROW[spec.weights[0].name], **(
        {'depth': 4} if 'depth' in spec.presets[spec.weights[0].preset]
        else {'depths': (1,) * len(spec.presets[spec.weights[0].preset]['depths'])}))
    for spec in registry.FAMILIES.values()}
# Their output strides, and those whose outputs span several strides (a pyramid, what smp's decoders and
# torchvision's FPN take; a plain ViT gives stride 16 alone)
STRIDES: dict[str, list[int]] = {
    v: [o.stride for o in registry.FAMILIES[k].preset_outputs(dict(registry.FAMILIES[k].presets[
        registry.FAMILIES[k].weights[0].preset], **SHALLOW[v]))] for k, v in SMALLEST.items()}
PYRAMIDS = tuple(v for v in SMALLEST.values() if len(set(STRIDES[v])) > 1)
# Those whose head reads a cls token (timm's ViT contract: forward_features gives tokens)
TOKEN_HEADS = tuple(v for k, v in SMALLEST.items() if registry.FAMILIES[k].head.pool == 'token')
# The fewest blocks that still hold every kind of block of a family (its spec's overrides of
# ``tiny``), for the tests whose cost grows with the block count (graph capture).
EVERY_KIND_ONCE: dict[str, dict[str, Any]] = {name: dict(spec.every_kind_once)
                                              for name, spec in registry.FAMILIES.items()}


def build_tiny(kind: str, init: bool = True, **overrides: Any) -> torch.nn.Module:
    """A small backbone of family ``kind``; ``overrides`` replace any of its settings (``init_cfg``
    too: the OpenMMLab adapter's class, initialised by ``init_weights()`` as a runner does)."""
    import inline_dense.openmmlab as models
    name, settings = TINY[kind]
    model = getattr(models, name)(**dict(settings, **overrides))
    if init:
        model.init_weights()
    return model


_TOOLS: dict[str, ModuleType] = {}


def import_tool(name: str) -> ModuleType:
    """tools/<name>.py as a module (``tools/test.py`` would clash with the stdlib's ``test``); tools/ goes
    on sys.path, as when a tool runs as a script (the development commands import tools/_checkout.py)."""
    if str(ROOT / 'tools') not in sys.path:
        sys.path.append(str(ROOT / 'tools'))
    if name not in _TOOLS:
        spec = importlib.util.spec_from_file_location(f'inline_dense_tools_{name}', ROOT / 'tools' / f'{name}.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TOOLS[name] = module
    return _TOOLS[name]


_CONFIGS: dict[str, Any] = {}


def load_config(path: Any) -> Any:
    """A fresh copy of the mmengine Config at ``path``, each file read once per process."""
    from mmengine.config import Config
    key = str(path)
    if key not in _CONFIGS:
        _CONFIGS[key] = Config.fromfile(key)
    return copy.deepcopy(_CONFIGS[key])


TOY_DATA = dict(num_train=8, num_val=3, image_size=64)

# Fewer blocks per stage (same widths) for building whole detectors / segmentors fast, by backbone
# class: each spec's ``shrunk_depths`` (a preset's layout kept, e.g. InLine-Swin-B's mixed stage).
SHRUNK_DEPTHS = {spec.class_name: spec.shrunk_depths for spec in registry.FAMILIES.values()}


def shrink_backbone(cfg: Any, keep_init: bool = False) -> Any:
    """An mmengine Config whose InLine backbone has ``SHRUNK_DEPTHS``; no pretrained file
    unless ``keep_init``."""
    spec = registry.family_of_class(cfg.model.backbone.type)
    if spec is None:
        raise KeyError(f'{cfg.model.backbone.type} is no InLine backbone')
    cfg.model.backbone.update(spec.shrunk())  # depths per stage (a plain ViT: depth)
    if not keep_init:
        cfg.model.backbone.init_cfg = None
    return cfg


def no_network_downloads(monkeypatch: Any) -> None:
    """Every checkpoint download fails at once as an offline machine's would: the cache's one HTTP
    call (``checkpoint.cache.transfer``) raises DownloadError with the caller's hint."""
    from inline_dense.checkpoint import DownloadError, cache

    def no_network(url: str, out: Any, hint: str, dest: Path) -> dict[str, Any]:
        raise DownloadError(f'could not download {url}: no connection (the test is offline). {hint}')
    monkeypatch.setattr(cache, 'transfer', no_network)


def compiling_with(monkeypatch: Any, backend: Any) -> list:
    """Every ``torch.compile`` call made with dynamo ``backend`` instead (no inductor options); returns the list
    of the options each call asked for."""
    asked = []
    real = torch.compile

    def compile_with(fn: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get('options'))
        kwargs.update(backend=backend, options=None)
        return real(fn, **kwargs)
    monkeypatch.setattr(torch, 'compile', compile_with)
    return asked


def module_chains(call: Callable[[], Any], package: str) -> set[tuple[str, ...]]:
    """Runs ``call`` and returns every call stack it made, as the chain of ``package``'s modules on it
    (last name part; other modules left out, a module calling itself counted once). A chain naming a
    module twice is a round trip: that module was entered again on the way down."""
    stack: list[str] = []
    chains: set[tuple[str, ...]] = set()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == 'call':
            stack.append(frame.f_globals.get('__name__', ''))
            ours = [m.rsplit('.', 1)[-1] for m in stack if m.startswith(package + '.')]
            chains.add(tuple(m for i, m in enumerate(ours) if i == 0 or ours[i - 1] != m))
        elif event == 'return' and stack:
            stack.pop()
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return chains


def quick_toy_options(max_iters: int) -> list[str]:
    """``--cfg-options`` for a toy run of ``max_iters`` iterations: batch 2, seed 0, a checkpoint and a log
    line every iteration, data loaded in the main process."""
    opts = [f'train_cfg.max_iters={max_iters}', 'train_dataloader.batch_size=2', 'randomness.seed=0',
            'default_hooks.checkpoint.interval=1', 'default_hooks.logger.interval=1']
    for loader in ('train_dataloader', 'test_dataloader'):
        opts += [f'{loader}.num_workers=0', f'{loader}.persistent_workers=False']
    return opts


def train_toy_checkpoint(config: str, toy_dir, work_dir):
    """One training iteration of ``config`` through tools/train.py, run from ``toy_dir`` (where the toy data
    sits), no validation; the path of the checkpoint it writes in ``work_dir``."""
    import os
    cwd = os.getcwd()
    os.chdir(toy_dir)
    try:
        import_tool('train').main([config, '--work-dir', str(work_dir), '--cfg-options', 'val_cfg=None',
                                   'val_dataloader=None', 'val_evaluator=None', *quick_toy_options(1)])
    finally:
        os.chdir(cwd)
    return work_dir / 'iter_1.pth'
