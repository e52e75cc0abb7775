"""tools/demo_toy.py against inputs it cannot score: another config's checkpoint (DeiT weights in the
Swin toy), a backbone-only file, a checkpoint cut short, a segmentation config. Each is refused in
one line (a CheckpointMismatch lists the weights) before any AP is computed, as tools/test.py does."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from helpers import import_tool
from inline_dense.checkpoint import CheckpointError
from inline_dense.openmmlab.engine import CheckpointMismatch
from inline_dense.openmmlab.engine.tool_inputs import ToolInputError

ROOT = Path(__file__).resolve().parents[2]
TOY = ROOT / 'configs' / 'toy'
DEIT_TOY = str(TOY / 'mask-rcnn_inline-deit-mini_simple-fpn_toy-coco.py')
SWIN_TOY = str(TOY / 'mask-rcnn_inline-swin-mini_fpn_toy-coco.py')
UPERNET_TOY = str(TOY / 'upernet_inline-swin-mini_toy-ade.py')
demo = import_tool('demo_toy')


def built(config: str) -> torch.nn.Module:
    from mmdet.registry import MODELS
    from mmdet.utils import register_all_modules
    from mmengine.config import Config
    register_all_modules()
    return MODELS.build(Config.fromfile(config).model)


@pytest.fixture(scope='module')
def deit_checkpoint(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp('deit') / 'iter_400.pth'
    torch.save({'state_dict': built(DEIT_TOY).state_dict(), 'meta': {}}, path)
    return str(path)


@pytest.fixture(scope='module')
def backbone_only_checkpoint(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp('backbone') / 'backbone.pth'
    torch.save({'state_dict': built(SWIN_TOY).backbone.state_dict()}, path)
    return str(path)


def no_scoring(monkeypatch):
    """The test loop's evaluation fails the test: a refusal must come before any AP."""
    from mmengine.evaluator import Evaluator
    monkeypatch.setattr(Evaluator, 'evaluate', lambda *a, **k: pytest.fail('the demo scored weights that do not fit'))


@pytest.mark.parametrize('which', ['deit', 'backbone only'])
def test_the_demo_refuses_a_checkpoint_that_does_not_fit(which, deit_checkpoint, backbone_only_checkpoint, toy_dir,
                                                         tmp_path, monkeypatch):
    monkeypatch.chdir(toy_dir)
    no_scoring(monkeypatch)
    checkpoint = deit_checkpoint if which == 'deit' else backbone_only_checkpoint
    with pytest.raises(CheckpointMismatch) as info:
        demo.main(['--checkpoint', checkpoint, '--work-dir', str(tmp_path), '--cfg-options',
                   'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False'])
    message = str(info.value)
    assert f'{checkpoint} does not fit MaskRCNN' in message
    assert 'weights missing from the checkpoint' in message
    assert message.splitlines()[-1].strip().startswith('Pass the iter_<N>.pth a demo run of --config '
                                                       'mask-rcnn_inline-swin-mini_fpn_toy-coco.py wrote')
    assert '--allow-partial-load' not in message  # the demo has no such option
    assert not (tmp_path / 'predictions.png').exists()


@pytest.mark.parametrize('size', [0, 3_000, 10_000, 60_000, 200_000])
def test_the_demo_and_test_tool_refuse_a_cut_checkpoint_in_one_line(size, deit_checkpoint, toy_dir, tmp_path,
                                                                   monkeypatch):
    """Cut to about 5-65 KB, torch's zip reader raised a bare OSError (EINVAL); any size is one line now."""
    monkeypatch.chdir(toy_dir)  # tools/test.py checks the config's dataset first
    cut = tmp_path / 'cut.pth'
    cut.write_bytes(Path(deit_checkpoint).read_bytes()[:size])
    assert Path(deit_checkpoint).stat().st_size > 200_000
    for tool in ('demo_toy', 'test'):
        argv = ['--checkpoint', str(cut)] if tool == 'demo_toy' else [SWIN_TOY, str(cut)]
        with pytest.raises(CheckpointError, match='empty' if size == 0 else 'cut off or damaged') as info:
            import_tool(tool).main([*argv, '--work-dir', str(tmp_path / 'w')])
        assert len(str(info.value).splitlines()) == 1
        assert 'Errno' not in str(info.value) or 'cut off' in str(info.value)


def test_the_demo_refuses_a_segmentation_config_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, 'build_runner', lambda cfg: pytest.fail('a runner was built'))
    with pytest.raises(ToolInputError, match=r'is an mmseg config; the demo trains and scores a detector') as info:
        demo.main(['--config', UPERNET_TOY, '--work-dir', str(tmp_path)])
    assert 'toy-coco.py' in str(info.value)


@pytest.mark.slow
def test_the_demo_command_prints_one_line_for_a_segmentation_config(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / 'tools' / 'demo_toy.py'), '--config', UPERNET_TOY,
                           '--work-dir', str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip().splitlines()[-1]]
    assert proc.stderr.startswith('error: --config ')
