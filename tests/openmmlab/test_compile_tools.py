"""``--compile`` in tools/test.py and tools/demo_toy.py: the test loop runs the backbone and neck compiled
(``InferenceCompileHook``), composes with ``--amp``, says when it compiles, gives eager's metrics, and the
model is eager again after the test. torch.compile runs dynamo's capture with a counting backend here (the
graphs and their guards are dynamo's; inductor's kernels are checked in tests/runtime/test_compiling.py)."""
import math
import os
from pathlib import Path

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from helpers import import_tool

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / 'configs' / 'toy' / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
pytestmark = pytest.mark.usefixtures('one_thread')


def quick(max_iters: int):
    opts = [f'train_cfg.max_iters={max_iters}', 'train_dataloader.batch_size=2', 'randomness.seed=0',
            'default_hooks.checkpoint.interval=1', 'default_hooks.logger.interval=1']
    for loader in ('train_dataloader', 'test_dataloader'):
        opts += [f'{loader}.num_workers=0', f'{loader}.persistent_workers=False']
    return opts


@pytest.fixture(scope='module')
def checkpoint(toy_dir, tmp_path_factory):
    work = tmp_path_factory.mktemp('compile_ckpt')
    cwd = os.getcwd()
    os.chdir(toy_dir)
    try:
        import_tool('train').main([CONFIG, '--work-dir', str(work), '--cfg-options', 'val_cfg=None',
                                   'val_dataloader=None', 'val_evaluator=None', *quick(1)])
    finally:
        os.chdir(cwd)
    return work / 'iter_1.pth'


@pytest.fixture
def counter(monkeypatch):
    counter = CompileCounter()
    real = torch.compile

    def compile_counting(fn, **kwargs):
        kwargs.update(backend=counter, options=None)
        return real(fn, **kwargs)
    monkeypatch.setattr(torch, 'compile', compile_counting)
    torch._dynamo.reset()
    yield counter
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize('amp', [False, True])
def test_test_tool_compile(amp, checkpoint, toy_dir, tmp_path, monkeypatch, counter, capsys):
    from inline_dense.runtime.compiling import compiler_problem
    if compiler_problem() is not None:
        pytest.skip('no C++ compiler: the tool runs eagerly (tests/runtime/test_compiling.py)')
    monkeypatch.chdir(toy_dir)
    tool = import_tool('test')
    extra = ['--amp'] if amp else []
    options = ['--cfg-options', *quick(1)]
    eager = tool.main([CONFIG, str(checkpoint), *extra, '--work-dir', str(tmp_path / 'eager'), *options,
                       f'visualizer.name=vis_eager_{amp}'])
    compiled = tool.main([CONFIG, str(checkpoint), *extra, '--compile', '--work-dir', str(tmp_path / 'compiled'),
                          *options, f'visualizer.name=vis_compiled_{amp}'])
    for key in ('coco/bbox_mAP', 'coco/segm_mAP'):
        assert math.isfinite(compiled[key])
        assert abs(compiled[key] - eager[key]) < 1e-3, (key, compiled[key], eager[key])
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith('[compile]')]
    assert any(line.startswith('[compile] backbone: compiled for ') for line in said), said
    assert any(line.startswith('[compile] neck: compiled for ') for line in said), said
    # the toy val images, resized and padded to several sizes at batch 1: one graph per part
    assert counter.frame_count == 2, said
