"""tools/export_onnx.py: the Semantic FPN head exports faithfully, a failed check says whether the
backbone or what follows it is at fault, and a failed export never replaces an existing --out.

mmseg's FPNHead upsamples with ``Upsample(scale_factor=2)``, whose size ``int(H * 2.0)`` torch.export
froze to the export example's: the graph resized every input's maps to that size (the toy Semantic
FPN's check failed at 6e-2 to 1.3e-1 relative, with any backbone). A tiny segmentor with the same
neck and head (convolutions for a backbone) shows it in seconds.
"""
import importlib.util
import os
from pathlib import Path

import onnxruntime  # noqa: F401  (the setup installs it; missing, these tests fail)
import pytest
import torch
from torch import nn

import inline_dense.openmmlab  # noqa: F401
from inline_dense.deploy import (
    OnnxMismatchError,
    SegmentorLogits,
    UpsampleByInteger,
    check_onnx,
    export_onnx,
    replace_float_upsampling,
)

ROOT = Path(__file__).resolve().parents[2]
EXPORT = (2, 3, 97, 101)
CHECK = [(1, 3, 64, 75), (1, 3, 99, 70)]


class Pyramid(nn.Module):
    """(B, 3, H, W) -> maps at strides 4, 8, 16, 32 (8 channels), like a backbone's stages."""

    def __init__(self, upsample_inside: bool = False) -> None:
        super().__init__()
        from mmseg.models.utils import Upsample
        self.stem = nn.Conv2d(3, 8, 4, 4)
        self.down = nn.ModuleList(nn.Conv2d(8, 8, 3, 2, 1) for _ in range(3))
        # a backbone at fault: it upsamples as mmseg's FPNHead does, and is not swapped below
        self.up = Upsample(scale_factor=2, mode='bilinear', align_corners=False) if upsample_inside else None

    def forward(self, x):
        outs = [self.stem(x)]
        for down in self.down:
            outs.append(down(outs[-1]))
        if self.up is not None:
            outs[0] = outs[0] + nn.functional.interpolate(self.up(outs[1]), size=outs[0].shape[-2:])
        return outs


class TinySemanticFPN(nn.Module):
    """An mmseg EncoderDecoder's ``_forward``: backbone -> mmseg FPN -> FPNHead."""
    align_corners = False

    def __init__(self, upsample_inside: bool = False) -> None:
        super().__init__()
        from mmseg.models.decode_heads import FPNHead
        from mmseg.models.necks import FPN
        self.backbone = Pyramid(upsample_inside)
        self.neck = FPN([8] * 4, 8, 4)
        self.decode_head = FPNHead(feature_strides=[4, 8, 16, 32], in_channels=[8] * 4, in_index=[0, 1, 2, 3],
                                   channels=8, num_classes=3)

    def _forward(self, x):
        return self.decode_head(self.neck(self.backbone(x)))


def tiny(swap: bool, upsample_inside: bool = False) -> SegmentorLogits:
    torch.manual_seed(0)
    seg = TinySemanticFPN(upsample_inside).eval()
    if swap:
        swapped = replace_float_upsampling(seg.decode_head)
        assert len(swapped) == 6  # scale heads 1, 2, 3: 1 + 2 + 3 upsamplings
    return SegmentorLogits(seg).eval()


def test_upsampling_by_integer_is_mmsegs():
    from mmseg.models.utils import Upsample
    for mode, corners in (('bilinear', False), ('bilinear', True), ('nearest', None)):
        ref = Upsample(scale_factor=2, mode=mode, align_corners=corners)
        ours = UpsampleByInteger(2, mode, corners)
        for h, w in ((7, 9), (1, 5), (16, 16)):
            x = torch.randn(2, 3, h, w)
            assert torch.equal(ours(x), ref(x))
    model = nn.Sequential(Upsample(scale_factor=2), Upsample(size=(4, 4)), Upsample(scale_factor=1.5))
    assert replace_float_upsampling(model) == ['0']  # a fixed size or a fractional factor stays


@pytest.mark.slow
def test_semantic_fpn_head_exports_faithfully(tmp_path, one_thread):
    path = str(tmp_path / 'fpn.onnx')
    module = tiny(swap=True)
    export_onnx(module, path, ['logits'], EXPORT)
    rows = check_onnx(path, module, CHECK, tolerance=1e-4, runs=1)
    assert max(r.relative_error for r in rows) < 1e-4
    # mmseg's own Upsample: the sizes froze at export, and the check says so
    module = tiny(swap=False)
    export_onnx(module, path, ['logits'], EXPORT)
    with pytest.raises(OnnxMismatchError, match='above the tolerance'):
        check_onnx(path, module, CHECK, tolerance=1e-4, runs=1)


def load_tool():
    spec = importlib.util.spec_from_file_location('export_onnx_tool', ROOT / 'tools' / 'export_onnx.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def run_tool(monkeypatch, module: nn.Module, out: Path) -> int:
    """tools/export_onnx.py main() on ``module`` (standing for what the config builds)."""
    tool = load_tool()
    import inline_dense.deploy as deploy
    monkeypatch.setattr(deploy, 'deployable', lambda *args, **kwargs: (module, 'segmentation', ['logits']))
    config = str(ROOT / 'configs' / 'toy' / 'fpn_inline-pvt-mini_toy-ade.py')
    return tool.main([config, '--out', str(out), '--export-shape', 'x'.join(map(str, EXPORT)),
                      '--check-shapes', *('x'.join(map(str, s)) for s in CHECK), '--runs', '1'])


@pytest.mark.slow
def test_a_failed_export_leaves_the_existing_file_and_blames_the_head(tmp_path, monkeypatch, capsys, one_thread):
    out = tmp_path / 'model.onnx'
    out.write_bytes(b'the deployed model')
    assert run_tool(monkeypatch, tiny(swap=False), out) == 1
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith('[export] FAILED'))
    assert 'The backbone alone matches' in line
    assert 'after it (FPN, FPNHead)' in line
    assert 'another --attn-impl cannot help' in line
    assert f'{out} left unchanged' in line
    assert out.read_bytes() == b'the deployed model'
    assert os.listdir(tmp_path) == ['model.onnx']  # no temporary file left behind


@pytest.mark.slow
def test_a_backbone_at_fault_is_named(tmp_path, monkeypatch, capsys, one_thread):
    out = tmp_path / 'model.onnx'
    assert run_tool(monkeypatch, tiny(swap=True, upsample_inside=True), out) == 1
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith('[export] FAILED'))
    assert 'The backbone alone already differs' in line
    assert f'{out} not written' in line
    assert not out.exists()
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_a_passing_export_replaces_the_file(tmp_path, monkeypatch, capsys, one_thread):
    out = tmp_path / 'model.onnx'
    out.write_bytes(b'an older export')
    assert run_tool(monkeypatch, tiny(swap=True), out) == 0
    assert 'OK: onnxruntime matches PyTorch' in capsys.readouterr().out
    assert out.read_bytes()[:2] != b'an'
    assert os.listdir(tmp_path) == ['model.onnx']
    assert check_onnx(str(out), tiny(swap=True), CHECK[:1], runs=1)[0].relative_error < 1e-4


def test_out_that_is_a_directory_is_refused(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as info:  # at the command line, before the model is built
        run_tool(monkeypatch, tiny(swap=True), tmp_path)
    assert info.value.code == 2
    assert 'is a directory' in capsys.readouterr().err
