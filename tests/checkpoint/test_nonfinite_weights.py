"""Weights with NaN or inf are refused where they are loaded, naming the tensors:
pretrained backbone files, checkpoints loaded by the tools (load_from, --resume, tools/test.py)."""
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from reference_models import authors_checkpoint, build_reference_backbone

from inline_dense.checkpoint.finite import NonFiniteWeightsError, nonfinite_tensors
from inline_dense.openmmlab.engine import CheckpointFitHook
from inline_dense.openmmlab.engine.launch import run_tool

ROOT = Path(__file__).resolve().parents[2]
RETINANET_TOY = str(ROOT / 'configs' / 'toy' / 'retinanet_inline-pvt-mini_fpn_toy-coco.py')
SMALL_TOY = [f'{loader}.dataset.toy_data.{k}={v}' for loader in ('train_dataloader', 'val_dataloader',
                                                                  'test_dataloader')
             for k, v in (('num_train', 3), ('num_val', 2), ('image_size', 64))]


def test_nonfinite_tensors_are_counted():
    state = {'a': torch.tensor([1.0, float('nan'), float('nan')]), 'b': torch.tensor([float('inf'), 0.0]),
             'c': torch.ones(2), 'n': torch.tensor([3]), 'meta': 'x'}
    assert nonfinite_tensors(state) == ['a (2 NaN, 0 inf of 3)', 'b (0 NaN, 1 inf of 2)']


def test_pretrained_file_with_a_nan_and_an_inf_is_refused(tmp_path):
    source = torch.load(authors_checkpoint('inline_pvt_mini'), weights_only=True)
    state = source['model']
    state['patch_embed1.proj.weight'].view(-1)[3] = float('nan')
    state['block4.0.mlp.fc2.bias'][0] = float('-inf')
    path = tmp_path / 'poisoned.pth'
    torch.save(source, path)
    with pytest.raises(NonFiniteWeightsError) as info:
        build_reference_backbone('inline_pvt_mini', str(path))
    message = str(info.value)
    assert 'non-finite weights (NaN or inf) in 2 tensor(s)' in message
    assert '(1 NaN, 0 inf of' in message
    assert '(0 NaN, 1 inf of' in message
    assert 'Download or convert the file again' in message


def test_fit_hook_refuses_nonfinite_weights_even_for_a_partial_load():
    model = torch.nn.Linear(2, 2)
    runner = SimpleNamespace(model=model)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state['weight'][0, 0] = float('nan')
    for allow_partial in (False, True):
        with pytest.raises(NonFiniteWeightsError, match=r'c.pth holds non-finite weights .* weight \(1 NaN'):
            CheckpointFitHook(allow_partial=allow_partial, source='c.pth').after_load_checkpoint(
                runner, {'state_dict': state})


@pytest.fixture
def nan_retinanet(tmp_path):
    """A checkpoint of the toy RetinaNet with a NaN in its classification head."""
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    register_all_modules()
    model = MODELS.build(Config.fromfile(RETINANET_TOY).model)
    state = model.state_dict()
    state['bbox_head.retina_cls.weight'].view(-1)[0] = float('nan')
    path = tmp_path / 'nan.pth'
    torch.save({'state_dict': state, 'meta': {}}, path)
    return str(path)


def test_test_tool_fails_on_nonfinite_weights(nan_retinanet, tmp_path, monkeypatch, load_tool):
    monkeypatch.chdir(tmp_path)
    test_tool = load_tool('test')
    argv = [RETINANET_TOY, nan_retinanet, '--work-dir', str(tmp_path / 'w'), '--cfg-options', *SMALL_TOY]
    with pytest.raises(SystemExit) as info:
        run_tool(lambda: test_tool.main(argv), test_tool.USER_ERRORS)
    message = str(info.value.code)
    assert message.startswith(f'error: {nan_retinanet} holds non-finite weights')
    assert 'bbox_head.retina_cls.weight (1 NaN, 0 inf' in message
    assert 'earlier checkpoints' in message
