"""tools/train.py --resume checks what it is given before training: a checkpoint a training
run wrote (not empty, truncated, a weights-only file or another model's), a config that does not
contradict the checkpoint (refused where the checkpoint's state would win, warned where the new
config wins, and then recorded as run), and a work dir with nothing to resume."""
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from inline_dense.openmmlab.engine import CheckpointMismatch
from inline_dense.openmmlab.engine.resume_checks import ResumeError, config_changes

ROOT = Path(__file__).resolve().parents[2]
RETINANET_TOY = str(ROOT / 'configs' / 'toy' / 'retinanet_inline-pvt-mini_fpn_toy-coco.py')
MASK_RCNN_TOY = str(ROOT / 'configs' / 'toy' / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
SMALL_TOY = [f'{loader}.dataset.toy_data.{k}={v}' for loader in ('train_dataloader', 'val_dataloader',
                                                                  'test_dataloader')
             for k, v in (('num_train', 3), ('num_val', 2), ('image_size', 64))]
SHORT = ['train_cfg.max_iters=2', 'default_hooks.checkpoint.interval=2', 'train_dataloader.batch_size=2',
         'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False', *SMALL_TOY]


@pytest.fixture(scope='module')
def trained(tmp_path_factory, load_tool):
    """(cwd, work dir) of a 2-iteration toy RetinaNet run with its checkpoint iter_2.pth."""
    import os
    base = tmp_path_factory.mktemp('resume')
    cwd = os.getcwd()
    os.chdir(base)
    try:
        load_tool('train').main([RETINANET_TOY, '--work-dir', str(base / 'run'), '--cfg-options', *SHORT])
    finally:
        os.chdir(cwd)
    assert (base / 'run' / 'iter_2.pth').is_file()
    return base, base / 'run'


@pytest.fixture
def run_copy(trained, tmp_path, monkeypatch):
    """A copy of the trained work dir (with its own last_checkpoint) in a fresh cwd with the toy data."""
    base, run = trained
    monkeypatch.chdir(base)
    work = tmp_path / 'run'
    shutil.copytree(run, work)
    (work / 'last_checkpoint').write_text(str(work / 'iter_2.pth'))
    return work


def train(load_tool, work, *options, resume='--resume'):
    args = [RETINANET_TOY, '--work-dir', str(work)] + ([resume] if resume else [])
    load_tool('train').main([*args, '--cfg-options', *SHORT, *options])


def test_changed_optimizer_and_schedule_are_refused(run_copy, load_tool):
    with pytest.raises(ResumeError) as info:
        train(load_tool, run_copy, 'optim_wrapper.optimizer.lr=0.0001', 'param_scheduler.0.end=10')
    message = str(info.value)
    assert 'optim_wrapper.optimizer.lr: 0.001 -> 0.0001' in message
    assert 'param_scheduler' in message
    assert 'old values would win' in message
    assert f'load_from={run_copy / "iter_2.pth"} without --resume' in message
    assert not list(run_copy.glob('iter_3.pth'))
    assert (run_copy / 'last_checkpoint').read_text().endswith('iter_2.pth')


def test_changed_batch_and_length_are_warned_and_recorded_as_run(run_copy, load_tool):
    with pytest.warns(UserWarning, match='settings changed') as record:
        train(load_tool, run_copy, 'train_cfg.max_iters=3', 'default_hooks.checkpoint.interval=3',
              'train_dataloader.batch_size=1')
    message = next(str(w.message) for w in record if 'settings changed' in str(w.message))
    assert 'train_cfg.max_iters: 2 -> 3' in message
    assert 'train_dataloader.batch_size: 2 -> 1' in message
    assert 'the new values apply' in message
    saved = torch.load(run_copy / 'iter_3.pth', map_location='cpu', weights_only=False)
    cfg = Config.fromstring(saved['meta']['cfg'], '.py')
    assert cfg.train_dataloader.batch_size == 1
    assert cfg.train_cfg.max_iters == 3
    assert saved['meta']['iter'] == 3  # resumed at 2, ran one more iteration
    dumped = Config.fromfile(str(run_copy / Path(RETINANET_TOY).name))
    assert dumped.train_dataloader.batch_size == 1
    assert saved['optimizer']['param_groups'][0]['initial_lr'] == cfg.optim_wrapper.optimizer.lr


def test_an_unchanged_resume_warns_nothing_about_settings(run_copy, load_tool):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        train(load_tool, run_copy, 'train_cfg.max_iters=2')
    assert not [w for w in record if 'settings changed' in str(w.message)]


def test_config_changes_sorts_what_wins():
    saved = Config(dict(model=dict(type='M', backbone=dict(depth=1, init_cfg=dict(checkpoint='a'))),
                        optim_wrapper=dict(type='OptimWrapper', optimizer=dict(lr=1.0, betas=(0.9, 0.99))),
                        param_scheduler=[dict(end=3)], train_cfg=dict(max_iters=4),
                        train_dataloader=dict(batch_size=2)))
    new = Config(dict(model=dict(type='M', backbone=dict(depth=2, init_cfg=None)),
                      optim_wrapper=dict(type='AmpOptimWrapper', optimizer=dict(lr=1.0, betas=[0.9, 0.99])),
                      param_scheduler=[dict(end=3)], train_cfg=dict(max_iters=4),
                      train_dataloader=dict(batch_size=2)))
    assert config_changes(saved, new) == {
        'overridden': [], 'applied': ["optim_wrapper.type: 'OptimWrapper' -> 'AmpOptimWrapper'",
                                      'model.backbone.depth: 1 -> 2']}


def test_a_changed_optimizer_constructor_is_refused_up_front():
    """The constructor makes the parameter groups the saved optimizer state must match: refused as
    paramwise_cfg is, not warned about and then failed on inside mmengine."""
    saved = Config(dict(model=dict(type='M'), optim_wrapper=dict(type='OptimWrapper', optimizer=dict(lr=1.0))))
    new = Config(dict(model=dict(type='M'), optim_wrapper=dict(
        type='OptimWrapper', optimizer=dict(lr=1.0), constructor='LayerDecayOptimWrapperConstructor')))
    assert config_changes(saved, new) == {
        'overridden': ["optim_wrapper.constructor: None -> 'LayerDecayOptimWrapperConstructor'"], 'applied': []}
    assert config_changes(new, saved)['overridden'] == [
        "optim_wrapper.constructor: 'LayerDecayOptimWrapperConstructor' -> None"]


def test_the_train_tool_refuses_a_changed_constructor_before_the_runner(run_copy, load_tool, monkeypatch):
    from inline_dense.openmmlab.engine import launch
    monkeypatch.setattr(launch, 'build_runner', lambda cfg: pytest.fail('a runner was built'))
    with pytest.raises(ResumeError, match=r"old values would win.*optim_wrapper\.constructor: None -> "
                                          r"'DefaultOptimWrapperConstructor'"):
        train(load_tool, run_copy, 'optim_wrapper.constructor=DefaultOptimWrapperConstructor')


def test_nothing_to_resume_warns_that_training_starts_from_scratch(trained, tmp_path, monkeypatch, load_tool):
    monkeypatch.chdir(trained[0])
    with pytest.warns(UserWarning, match='has no last_checkpoint, so there is nothing to resume: training starts '
                                         r'from scratch \(iteration 0\)'):
        train(load_tool, tmp_path / 'empty', 'train_cfg.max_iters=1')


@pytest.mark.parametrize('kind', ['empty', 'truncated', 'authors', 'missing'])
def test_files_that_cannot_be_resumed_are_refused_in_one_line(kind, run_copy, tmp_path, load_tool):
    path = tmp_path / f'{kind}.pth'
    if kind == 'truncated':
        data = (run_copy / 'iter_2.pth').read_bytes()
        path.write_bytes(data[:len(data) // 2])
    elif kind == 'authors':
        shutil.copy(ROOT / 'tests' / 'data' / 'fixtures' / 'inline_pvt_mini_authors_layout.pth', path)
    elif kind == 'empty':
        path.write_bytes(b'')
    expected = {'empty': 'it is empty', 'truncated': 'cut off or damaged', 'missing': 'no such checkpoint file',
                'authors': 'holds weights but no training state'}[kind]
    with pytest.raises(ResumeError, match=expected) as info:
        load_tool('train').main([RETINANET_TOY, '--work-dir', str(run_copy), '--resume', str(path),
                                 '--cfg-options', *SHORT])
    advice = {'empty': '--resume alone.', 'truncated': '--resume alone.', 'missing': 'in the work dir.',
              'authors': f'--cfg-options load_from={path} without --resume.'}[kind]
    assert str(info.value).endswith(advice)
    assert '\n' not in str(info.value)


def test_another_models_checkpoint_is_refused(run_copy, load_tool):
    with pytest.raises(ResumeError, match=r'trained for a RetinaNet model .* this config builds a MaskRCNN'):
        load_tool('train').main([MASK_RCNN_TOY, '--work-dir', str(run_copy), '--resume',
                                 str(run_copy / 'iter_2.pth'), '--cfg-options', *SHORT])


def test_weights_that_no_longer_fit_are_refused_before_the_optimizer(run_copy, load_tool):
    with pytest.raises(CheckpointMismatch, match=r'--resume .*iter_2.pth does not fit RetinaNet'):
        train(load_tool, run_copy, 'model.bbox_head.feat_channels=32')


def test_resumed_nonfinite_weights_are_refused(run_copy, load_tool):
    from inline_dense.checkpoint.finite import NonFiniteWeightsError
    path = run_copy / 'iter_2.pth'
    checkpoint = torch.load(path, map_location='cpu', weights_only=False)
    checkpoint['state_dict']['neck.fpn_convs.0.conv.weight'].view(-1)[0] = float('inf')
    torch.save(checkpoint, path)
    with pytest.raises(NonFiniteWeightsError, match=r'neck.fpn_convs.0.conv.weight \(0 NaN, 1 inf'):
        train(load_tool, run_copy)


def test_a_truncated_newest_checkpoint_falls_back_and_is_checked_too(run_copy, load_tool):
    data = (run_copy / 'iter_2.pth').read_bytes()
    (run_copy / 'iter_4.pth').write_bytes(data[:len(data) // 3])
    (run_copy / 'last_checkpoint').write_text(str(run_copy / 'iter_4.pth'))
    with (pytest.warns(UserWarning, match=r'iter_4.pth, which is missing or truncated; resuming from .*iter_2.pth'),
          pytest.raises(ResumeError, match=r'--resume .*iter_2.pth: these settings differ .* '
                                           r'optim_wrapper.optimizer.lr: 0.001 -> 0.002')):
        train(load_tool, run_copy, 'optim_wrapper.optimizer.lr=0.002')
