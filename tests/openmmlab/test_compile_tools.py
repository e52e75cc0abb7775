"""``--compile`` in tools/test.py and tools/demo_toy.py: the test loop runs the backbone and neck compiled
(``InferenceCompileHook``), composes with ``--amp``, says when it compiles, gives eager's metrics, and the
model is eager again after the test. torch.compile runs dynamo's capture with a counting backend here (the
graphs and their guards are dynamo's; inductor's kernels are checked in tests/runtime/test_compiling.py)."""
import math
from pathlib import Path

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from helpers import compiling_with, import_tool, quick_toy_options, train_toy_checkpoint

ROOT = Path(__file__).resolve().parents[2]
CONFIG = str(ROOT / 'configs' / 'toy' / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
pytestmark = pytest.mark.usefixtures('one_thread')


@pytest.fixture(scope='module')
def checkpoint(toy_dir, tmp_path_factory):
    return train_toy_checkpoint(CONFIG, toy_dir, tmp_path_factory.mktemp('compile_ckpt'))


@pytest.fixture
def counter(monkeypatch):
    counter = CompileCounter()
    compiling_with(monkeypatch, counter)
    torch._dynamo.reset()
    yield counter
    torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize(('amp', 'sizes'), [(False, 'dynamic'), (True, 'dynamic'), (False, 'static')])
def test_test_tool_compile(amp, sizes, checkpoint, toy_dir, tmp_path, monkeypatch, counter, capsys):
    from inline_dense.runtime.compiling import compiler_problem
    if compiler_problem() is not None:
        pytest.skip('no C++ compiler: the tool runs eagerly (tests/runtime/test_compiling.py)')
    monkeypatch.chdir(toy_dir)
    tool = import_tool('test')
    extra = ['--amp'] if amp else []
    options = ['--cfg-options', *quick_toy_options(1)]
    eager = tool.main([CONFIG, str(checkpoint), *extra, '--work-dir', str(tmp_path / 'eager'), *options,
                       f'visualizer.name=vis_eager_{amp}'])
    compile_args = ['--compile'] if sizes == 'dynamic' else ['--compile', sizes]
    compiled = tool.main([CONFIG, str(checkpoint), *extra, *compile_args, '--work-dir', str(tmp_path / 'compiled'),
                          *options, f'visualizer.name=vis_compiled_{amp}'])
    for key in ('coco/bbox_mAP', 'coco/segm_mAP'):
        assert math.isfinite(compiled[key])
        assert abs(compiled[key] - eager[key]) < 1e-3, (key, compiled[key], eager[key])
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith('[compile]')]
    assert any(line.startswith('[compile] backbone: compiled for ') for line in said), said
    assert any(line.startswith('[compile] neck: compiled for ') for line in said), said
    # batch 1: one graph per part (static sizes: per part and size; a graph per size is
    # tests/runtime/test_compiling.py's)
    assert counter.frame_count == 2 if sizes == 'dynamic' else counter.frame_count >= 2, said
    assert all(f'sizes {sizes})' in line for line in said), said


def test_compile_hook_refuses_unknown_sizes_in_config_terms():
    """A ``custom_hooks`` entry with sizes other than 'dynamic' or 'static' fails when the Runner builds its hooks,
    before any test loop, naming the hook and the valid choices."""
    from mmengine.registry import HOOKS

    import inline_dense.openmmlab  # noqa: F401 (registers the hook)
    with pytest.raises(ValueError, match=r"InferenceCompileHook in custom_hooks: sizes='fixed' is not one of "
                                         r"\['dynamic', 'static'\]; use 'dynamic' for inputs of many sizes"):
        HOOKS.build(dict(type='InferenceCompileHook', sizes='fixed'))
    assert HOOKS.build(dict(type='InferenceCompileHook', sizes='static')).sizes == 'static'
