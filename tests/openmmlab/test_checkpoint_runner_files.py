"""mmengine Runner checkpoints load under ``torch.load(weights_only=True)`` once
``inline_dense`` is imported, and anything beyond what mmengine writes is still refused."""
import copy
import dataclasses
import os
import pickle
import pickletools
import uuid
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch
from mmengine.evaluator import BaseMetric
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch import nn

import inline_dense.openmmlab  # installs the allow-list
from inline_dense.openmmlab import mmengine_types

needs_new_torch = pytest.mark.skipif(not mmengine_types.needs_allow_list(torch.__version__),
                                     reason='torch < 2.6 does not default to weights_only=True')


class TinyModel(BaseModel):
    """Linear + BatchNorm on (B, 2) inputs; loss = MSE to (B, 1) targets."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)
        self.bn = nn.BatchNorm1d(1)

    def forward(self, inputs, targets, mode='tensor'):
        out = self.bn(self.fc(inputs))
        if mode == 'loss':
            return dict(loss=((out - targets) ** 2).mean())
        if mode == 'predict':
            return [dict(pred=o, target=t) for o, t in zip(out, targets)]
        return out


class TinyDataset(torch.utils.data.Dataset):
    metainfo: ClassVar[dict] = dict(classes=('a', 'b'), palette=[(1, 2, 3), (4, 5, 6)])

    def __init__(self):
        gen = torch.Generator().manual_seed(0)
        self.x = torch.randn(8, 2, generator=gen)
        self.y = torch.randn(8, 1, generator=gen)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return dict(inputs=self.x[i], targets=self.y[i])


class TinyMetric(BaseMetric):
    """Returns numpy scalars, as many OpenMMLab metrics do (they end up in the checkpoint)."""
    default_prefix = 'tiny'

    def process(self, data_batch, data_samples):
        self.results.extend(float(((d['pred'] - d['target']) ** 2).mean()) for d in data_samples)

    def compute_metrics(self, results):
        return dict(mse=np.float64(np.mean(results)), count=np.int64(len(results)),
                    mse32=np.float32(np.mean(results)))


class RecordResumedState(Hook):
    """Keeps what the runner holds right after ``load_or_resume`` (before any new iteration)."""

    def before_train(self, runner):
        self.iter = runner.iter
        # state_dict() shares tensors with the optimizer, which the next step updates in place
        self.optimizer = copy.deepcopy(runner.optim_wrapper.state_dict())
        self.loss_history = runner.message_hub.get_scalar('train/loss').data
        self.scheduler_steps = [s.last_step for s in runner.param_schedulers]
        self.best_score = runner.message_hub.get_info('best_score')


def make_runner(work_dir, max_iters, **kwargs) -> Runner:
    """A Runner with its own experiment name: mmengine shares the MessageHub, logger and
    visualizer between runners whose (timestamp) names collide."""
    loader = dict(dataset=TinyDataset(), sampler=dict(type='DefaultSampler', shuffle=True),
                  batch_size=4, collate_fn=dict(type='default_collate'))
    return Runner(
        model=TinyModel(), work_dir=str(work_dir), train_dataloader=loader, val_dataloader=loader,
        val_evaluator=[TinyMetric()], val_cfg=dict(),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1, momentum=0.9)),
        param_scheduler=[dict(type='LinearLR', start_factor=0.1, by_epoch=False, begin=0, end=2),
                         dict(type='MultiStepLR', milestones=[1, 3], by_epoch=False, begin=0, end=4)],
        train_cfg=dict(by_epoch=False, max_iters=max_iters, val_interval=2),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook', interval=2, by_epoch=False,
                                           save_best='tiny/mse', rule='less'),
                           logger=dict(type='LoggerHook', interval=1)),
        randomness=dict(seed=0), log_level='WARNING', experiment_name=f'foundation_{uuid.uuid4().hex}',
        **kwargs)


@dataclasses.dataclass
class Trained:
    """What a Runner held after 2 iterations (and a validation), copied, and its checkpoint."""
    ckpt: Path
    model_state: dict
    optimizer: dict
    loss_history: np.ndarray
    scheduler_steps: list
    best_score: float


@pytest.fixture(scope='module')
def trained(tmp_path_factory) -> Trained:
    work_dir = tmp_path_factory.mktemp('runner')
    runner = make_runner(work_dir, max_iters=2)
    runner.train()
    return Trained(ckpt=work_dir / 'iter_2.pth',
                   model_state=copy.deepcopy(runner.model.state_dict()),
                   optimizer=copy.deepcopy(runner.optim_wrapper.state_dict()),
                   loss_history=runner.message_hub.get_scalar('train/loss').data[0].copy(),
                   scheduler_steps=[s.last_step for s in runner.param_schedulers],
                   best_score=runner.message_hub.get_info('best_score'))


@pytest.fixture
def without_allow_list():
    """Temporarily removes every user allow-listed global (ours included)."""
    saved = torch.serialization.get_safe_globals()
    torch.serialization.clear_safe_globals()
    yield
    torch.serialization.add_safe_globals(saved)


@needs_new_torch
def test_runner_checkpoint_needs_the_allow_list(trained, without_allow_list):
    with pytest.raises(pickle.UnpicklingError):
        torch.load(trained.ckpt)


@needs_new_torch
def test_runner_checkpoint_loads_with_weights_only(trained):
    obj = torch.load(trained.ckpt)  # torch's default: weights_only=True
    assert set(obj) >= {'meta', 'state_dict', 'message_hub', 'optimizer', 'param_schedulers'}
    assert obj['meta']['iter'] == 2
    hub = obj['message_hub']
    np.testing.assert_array_equal(hub['log_scalars']['train/loss'].data[0], trained.loss_history)
    best = hub['runtime_info']['best_score']
    assert isinstance(best, np.float64)
    assert best == trained.best_score
    # mmengine's own loader (what --resume and tools/test.py use) goes through torch.load too.
    from mmengine.runner import load_checkpoint
    model = TinyModel()
    load_checkpoint(model, str(trained.ckpt), map_location='cpu')
    torch.testing.assert_close(model.state_dict(), trained.model_state)


@needs_new_torch
def test_runner_resumes_iter_optimizer_and_message_hub(trained, tmp_path):
    recorder = RecordResumedState()
    resumed = make_runner(tmp_path, max_iters=3, resume=True, load_from=str(trained.ckpt),
                          custom_hooks=[recorder])
    resumed.train()

    assert recorder.iter == 2
    before = trained.optimizer
    assert recorder.optimizer['param_groups'] == before['param_groups']
    assert before['state'], 'SGD with momentum should have state to resume'
    for key, state in before['state'].items():
        torch.testing.assert_close(recorder.optimizer['state'][key], state)
    np.testing.assert_array_equal(recorder.loss_history[0], trained.loss_history)
    assert recorder.scheduler_steps == trained.scheduler_steps
    assert recorder.best_score == trained.best_score
    # Training went on from iteration 2, not from 0.
    assert resumed.iter == 3
    assert len(resumed.message_hub.get_scalar('train/loss').data[0]) == 3


class RunsShellCommand:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f'touch {self.marker}',)


class CallsEval:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return eval, (f'open({str(self.marker)!r}, "w").write("pwned")',)


class ReachesPastHistoryBuffer:
    """Uses the ``getattr`` mmengine's pickles need, to fetch something else."""

    def __reduce__(self):
        from mmengine.logging import HistoryBuffer
        return getattr, (HistoryBuffer, 'register_statistics')


def pickled_globals(path) -> set:
    """The GLOBAL names in a torch.save file, read statically (nothing is executed)."""
    import zipfile
    with zipfile.ZipFile(path) as zf:
        data = zf.read(next(n for n in zf.namelist() if n.endswith('data.pkl')))
    return {arg for op, arg, _ in pickletools.genops(data) if op.name == 'GLOBAL'}


@needs_new_torch
@pytest.mark.parametrize(('payload', 'global_name'), [
    (RunsShellCommand, 'posix system'),
    (CallsEval, '__builtin__ eval'),
])
def test_malicious_pickle_is_refused(tmp_path, trained, payload, global_name):
    marker = tmp_path / 'marker'
    # Hide the payload inside an otherwise genuine Runner checkpoint.
    genuine = torch.load(trained.ckpt)
    genuine['meta']['evil'] = payload(marker)
    path = tmp_path / 'evil.pth'
    torch.save(genuine, path)
    assert global_name in pickled_globals(path)

    with pytest.raises(pickle.UnpicklingError):
        torch.load(path)
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    assert not marker.exists()


@needs_new_torch
def test_getattr_is_limited_to_history_buffer_statistics(tmp_path):
    path = tmp_path / 'getattr.pth'
    torch.save({'x': ReachesPastHistoryBuffer()}, path)
    assert '__builtin__ getattr' in pickled_globals(path)
    with pytest.raises(pickle.UnpicklingError, match='register_statistics'):
        torch.load(path)


@needs_new_torch
def test_numpy1_module_paths_load(tmp_path):
    """A checkpoint written under numpy 1 names ``numpy.core.multiarray``; numpy 2 writes
    ``numpy._core.multiarray``. Both must load, whichever numpy is installed."""
    obj = {'array': np.arange(3.0), 'scalar': np.float32(2.5), 'count': np.int64(7)}
    path = tmp_path / 'np.pth'
    torch.save(obj, path, _use_new_zipfile_serialization=False)  # a plain pickle stream
    raw = path.read_bytes()
    for this, other in ((b'numpy._core.multiarray\n', b'numpy.core.multiarray\n'),
                        (b'numpy.core.multiarray\n', b'numpy._core.multiarray\n')):
        if this in raw:
            variants = {this: raw, other: raw.replace(this, other)}
            break
    else:
        pytest.fail('no numpy multiarray global in the pickle: the test no longer exercises anything')
    for name, data in variants.items():
        path.write_bytes(data)
        loaded = torch.load(path)
        np.testing.assert_array_equal(loaded['array'], obj['array'])
        assert loaded['scalar'] == obj['scalar'], name
        assert loaded['scalar'].dtype == np.float32, name
        assert loaded['count'] == 7, name
        assert loaded['count'].dtype == np.int64, name


def test_allow_list_is_idempotent_and_narrow():
    allowed = inline_dense.openmmlab.mmengine_types.allow_mmengine_checkpoint_types()
    assert allowed == mmengine_types.needs_allow_list(torch.__version__)
    before = set(torch.serialization.get_safe_globals())
    mmengine_types.allow_mmengine_checkpoint_types()
    assert set(torch.serialization.get_safe_globals()) == before
    names = {entry[1] if isinstance(entry, tuple) else f'{entry.__module__}.{entry.__qualname__}'
             for entry in mmengine_types.mmengine_safe_globals()}
    assert not any(n.startswith(('os.', 'posix.', 'subprocess.', 'sys.')) for n in names)
    assert not {'builtins.eval', 'builtins.exec', 'builtins.__import__', 'builtins.open'} & names
    getattr_entry = [e for e in mmengine_types.mmengine_safe_globals() if isinstance(e, tuple)
                     and e[1] == 'builtins.getattr']
    assert getattr_entry
    assert getattr_entry[0][0] is not getattr


@pytest.mark.parametrize(('version', 'expected'), [
    ('2.1.2', False), ('2.5.1+cpu', False), ('2.6.0', True), ('2.6.0a0+git1234', True),
    ('2.14.7', True), ('3.0.0', True)])
def test_needs_allow_list_only_from_torch_2_6(version, expected):
    assert mmengine_types.needs_allow_list(version) is expected
