"""tools/train.py and tools/test.py against what users really do: another model's
checkpoint, a typo in a hook option, a missing dataset, a moved work directory, an unknown
mmengine, and the random-generator states that make a resume exact."""
import multiprocessing
import os
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import mmengine
import numpy as np
import pytest
import torch

from helpers import import_tool
from inline_dense.openmmlab.engine import (
    AtomicCheckpointHook,
    CheckpointFitHook,
    CheckpointMismatch,
    DeterministicResumeHook,
)
from inline_dense.openmmlab.engine.checkpointing import HookOptionError, own_checkpoint
from inline_dense.openmmlab.engine.launch import MissingDatasetError, run_tool
from inline_dense.openmmlab.engine.mmengine_compat import UnsupportedMmengine, check_mmengine_version, runner_private
from inline_dense.openmmlab.engine.randomness import restore_rng_state, resume_exactness_problems, rng_state

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / 'configs' / 'toy'
MASK_RCNN_TOY = str(TOY / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
RETINANET_TOY = str(TOY / 'retinanet_inline-pvt-mini_fpn_toy-coco.py')
COCO_RECIPE = str(ROOT / 'configs' / 'mask_rcnn' / 'mask-rcnn_inline-swin-t_fpn_1x_coco.py')
SMALL_TOY = [f'{loader}.dataset.toy_data.{k}={v}' for loader in ('train_dataloader', 'val_dataloader',
                                                                  'test_dataloader')
             for k, v in (('num_train', 3), ('num_val', 2), ('image_size', 64))]
train_tool = import_tool('train')
test_tool = import_tool('test')


@pytest.fixture
def retinanet_checkpoint(tmp_path):
    """A checkpoint of the toy RetinaNet (another model than the toy Mask R-CNN)."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    register_all_modules()
    model = MODELS.build(Config.fromfile(RETINANET_TOY).model)
    path = tmp_path / 'retinanet.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, path)
    return str(path)


def test_test_tool_refuses_another_models_checkpoint(retinanet_checkpoint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointMismatch) as info:
        test_tool.main([MASK_RCNN_TOY, retinanet_checkpoint, '--work-dir', str(tmp_path / 'w'),
                        '--cfg-options', *SMALL_TOY])
    message = str(info.value)
    assert f'{retinanet_checkpoint} does not fit MaskRCNN' in message
    assert "of the model's" in message
    assert 'weights missing from the checkpoint (backbone ' in message
    assert 'roi_head.' in message
    assert 'rpn_head.' in message
    assert 'in the checkpoint that the model does not have (backbone ' in message
    assert 'bbox_head.' in message
    assert '--allow-partial-load' in message


def test_train_tool_refuses_load_from_that_does_not_fit(retinanet_checkpoint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointMismatch, match='does not fit MaskRCNN'):
        train_tool.main([MASK_RCNN_TOY, '--work-dir', str(tmp_path / 'w'), '--cfg-options',
                         f'load_from={retinanet_checkpoint}', 'train_cfg.max_iters=1', *SMALL_TOY])


def test_a_tool_that_stops_on_an_error_ends_its_loader_workers(retinanet_checkpoint, tmp_path, monkeypatch):
    """The toy's IterBasedTrainLoop starts its loader's worker (num_workers=1, persistent) when the loop is
    built, before the checkpoint is found not to fit; the error's traceback keeps the runner alive."""
    monkeypatch.chdir(tmp_path)
    before = {p.pid for p in multiprocessing.active_children()}
    with pytest.raises(CheckpointMismatch) as info:
        train_tool.main([MASK_RCNN_TOY, '--work-dir', str(tmp_path / 'w'), '--cfg-options',
                         f'load_from={retinanet_checkpoint}', 'train_cfg.max_iters=1',
                         'train_dataloader.num_workers=1', 'train_dataloader.persistent_workers=True', *SMALL_TOY])
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert info.value.__traceback__ is not None
    assert not left, f'worker processes still running after the tool stopped: {left}'


def test_partial_load_on_purpose_is_logged_not_refused():
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 4))
    runner = SimpleNamespace(model=model)
    state = {'module.0.weight': torch.zeros(3, 2), '0.bias': torch.zeros(3), '1.weight': torch.zeros(5, 3),
             'extra': torch.zeros(1)}
    with pytest.raises(CheckpointMismatch) as info:
        CheckpointFitHook(source='c.pth').after_load_checkpoint(runner, {'state_dict': state})
    message = str(info.value)
    assert message.startswith('c.pth does not fit Sequential')
    assert "1 of the model's 4 weights missing from the checkpoint (1 1): 1.bias" in message
    assert '1 in the checkpoint that the model does not have (extra 1): extra' in message
    assert '1 with another shape (1 1): 1.weight: checkpoint (5, 3) vs model (4, 3)' in message
    CheckpointFitHook(allow_partial=True).after_load_checkpoint(runner, {'state_dict': state})
    fits = {k: v.clone() for k, v in model.state_dict().items()}
    CheckpointFitHook().after_load_checkpoint(runner, {'state_dict': fits})


def test_tools_document_the_partial_load_flag():
    assert train_tool.parse_args(['c.py', '--allow-partial-load']).allow_partial_load
    assert test_tool.parse_args(['c.py', 'x.pth', '--allow-partial-load']).allow_partial_load
    assert not test_tool.parse_args(['c.py', 'x.pth']).allow_partial_load


def test_a_typo_in_a_checkpoint_hook_option_is_refused_before_training(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(HookOptionError, match="'intervall' \\(did you mean 'interval'\\?\\)"):
        train_tool.main([RETINANET_TOY, '--work-dir', str(tmp_path / 'w'), '--cfg-options',
                         'default_hooks.checkpoint.intervall=2', *SMALL_TOY])
    assert not (tmp_path / 'data').exists()  # refused before any data was made or read
    AtomicCheckpointHook(interval=2, by_epoch=False, max_keep_ckpts=1)  # real options pass


def test_a_missing_dataset_is_one_clear_message(tmp_path, monkeypatch):
    """The library's error names the path, what it holds, where to get it and the config key; the
    tool adds what to type (--cfg-options, a toy config)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MissingDatasetError) as info:
        train_tool.main([COCO_RECIPE, '--work-dir', str(tmp_path / 'w')])
    message = str(info.value)
    for fragment in ('data/coco/ does not exist', 'train_dataloader.dataset', 'instances_{train,val}2017.json',
                     'cocodataset.org', 'train_dataloader.dataset.data_root'):
        assert fragment in message, fragment
    assert '--cfg-options' not in message
    assert 'tools/train.py' not in message
    with pytest.raises(SystemExit) as exit_info:
        run_tool(lambda: train_tool.main([COCO_RECIPE, '--work-dir', str(tmp_path / 'w')]), train_tool.USER_ERRORS)
    said = str(exit_info.value.code)
    assert said.startswith('error: ' + message)
    for fragment in ('--cfg-options train_dataloader.dataset.data_root=', 'python tools/train.py configs/toy/'):
        assert fragment in said, fragment


@pytest.mark.slow
def test_a_missing_dataset_from_the_command_line_has_no_traceback(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / 'tools' / 'train.py'), COCO_RECIPE], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get('PYTHONPATH', '')))
    assert proc.returncode == 1
    assert 'Traceback' not in proc.stderr
    assert 'error: data/coco/ does not exist' in proc.stderr


def test_resume_finds_the_work_directorys_own_checkpoint(tmp_path):
    original, copy = tmp_path / 'original', tmp_path / 'copy'
    for work in (original, copy):
        work.mkdir()
        (work / 'iter_4.pth').write_bytes(work.name.encode())
        (work / 'last_checkpoint').write_text(str(original / 'iter_4.pth'))  # mmengine's absolute path
    assert own_checkpoint(str(copy)) == str(copy / 'iter_4.pth')
    assert own_checkpoint(str(original)) == str(original / 'iter_4.pth')
    (copy / 'iter_4.pth').unlink()  # checkpoints elsewhere (out_dir): the pointer is kept
    assert own_checkpoint(str(copy)) == str(original / 'iter_4.pth')
    assert own_checkpoint(str(tmp_path)) is None


def test_exactness_warnings():
    from mmengine.config import Config
    assert resume_exactness_problems(Config.fromfile(RETINANET_TOY)) == []
    recipe = Config.fromfile(COCO_RECIPE)  # epoch-based, persistent data workers
    assert any('persistent_workers' in p for p in resume_exactness_problems(recipe))
    recipe.train_dataloader.persistent_workers = False
    assert resume_exactness_problems(recipe) == []
    recipe.custom_hooks = [dict(type='InLinePaddingMaskHook')]
    assert any('DeterministicResumeHook' in p for p in resume_exactness_problems(recipe))


def test_rng_states_survive_a_checkpoint(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    torch.save({'inline_rng': rng_state(7, 11)}, tmp_path / 'c.pth')
    expected = random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn()
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    state = torch.load(tmp_path / 'c.pth', weights_only=True)['inline_rng']
    assert state['seed'] == 7
    assert state['sampler_seed'] == 11
    restore_rng_state(state)
    assert (random.random(), np.random.rand(), torch.rand(1).item(), np.random.randn()) == expected


def test_private_mmengine_attributes_are_guarded(monkeypatch):
    check_mmengine_version()  # the pinned one
    with pytest.raises(UnsupportedMmengine, match=r'mmengine 0.11.0 is installed.*mmengine==0.10.7'):
        check_mmengine_version('0.11.0')
    monkeypatch.setattr(mmengine, '__version__', '1.0.0')
    for hook in (AtomicCheckpointHook, DeterministicResumeHook):
        with pytest.raises(UnsupportedMmengine):
            hook()
    with pytest.raises(UnsupportedMmengine, match='has no attribute _load_from'):
        runner_private(SimpleNamespace(), '_load_from')
