"""ONNX export with dynamic batch, height and width, checked with onnxruntime.

onnx, onnxruntime and onnxscript are installed by the setup: missing, these tests fail (no skip).
Exports take a minute or more on a CPU (torch.export's symbolic shapes), hence ``slow``.
"""
import logging

import onnxruntime  # noqa: F401  (fails loudly when the setup did not install it)
import pytest
import torch
from torch import nn

from helpers import EVERY_KIND_ONCE
from inline_dense.deploy import (
    EXPORT_SHAPE,
    AdaptiveAvgPool2dByMatmul,
    OnnxMismatchError,
    check_onnx,
    export_onnx,
    replace_adaptive_pooling,
)
from inline_dense.deploy.onnx_export import dynamic_image_shapes

# Sides above 7 * 32 (Swin's one-window rule does not apply at stride 32), multiples of neither 32 nor 7.
CHECK = [(1, 3, 233, 247), (2, 3, 250, 229), (1, 3, 297, 241)]


@pytest.mark.parametrize('out', [1, 2, 3, 6, (2, 5)])
def test_adaptive_pooling_by_matmul_is_torchs(out):
    torch.manual_seed(0)
    ours, ref = AdaptiveAvgPool2dByMatmul(out if isinstance(out, tuple) else (out, out)), nn.AdaptiveAvgPool2d(out)
    for h, w in [(7, 9), (13, 5), (6, 6), (17, 31)]:
        x = torch.randn(2, 4, h, w)
        assert torch.allclose(ours(x), ref(x), atol=1e-6)


def test_replace_adaptive_pooling_swaps_fixed_sizes_only():
    model = nn.Sequential(nn.AdaptiveAvgPool2d(3), nn.Sequential(nn.AdaptiveAvgPool2d((None, 2)), nn.ReLU()))
    assert replace_adaptive_pooling(model) == ['0']
    assert isinstance(model[0], AdaptiveAvgPool2dByMatmul)
    assert isinstance(model[1][0], nn.AdaptiveAvgPool2d)


class Outputs(nn.Module):
    """A backbone's tuple of stage outputs."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, image: torch.Tensor):
        return tuple(self.backbone(image))


@pytest.mark.slow
@pytest.mark.parametrize('kind', ['pvt', 'cswin'])  # InLine-Swin: through the segmenter, below
def test_backbone_exports_with_dynamic_sizes(kind, tiny_backbone, tmp_path, one_thread):
    """InLine-PVT and InLine-CSwin (InLine and softmax stages; InLine-Swin: the segmenter test),
    the default attn_impl: onnxruntime matches PyTorch at three sizes other than the export one,
    batch 1 and 2."""
    torch.manual_seed(0)
    module = Outputs(tiny_backbone(kind, **EVERY_KIND_ONCE[kind])).eval()
    path = str(tmp_path / f'{kind}.onnx')
    ranges = export_onnx(module, path, [f'out{i}' for i in range(4)])
    assert ranges['height'][1] is None
    assert ranges['width'][1] is None  # no upper bound
    rows = check_onnx(path, module, CHECK, tolerance=1e-4, runs=1)
    assert [r.shape for r in rows] == CHECK
    assert all(r.relative_error < 1e-4 for r in rows)


@pytest.mark.slow
def test_first_capture_of_a_batch_of_one_needs_no_fallback(tiny_backbone, one_thread):
    """torch.onnx captures a model first with ``torch.export`` (non-strict), sizes traced size-obliviously,
    and falls back to dynamo's capture when that raises. From a batch of 1 the first capture failed in
    InLine attention's ``torch.cond`` (a (1, 1) token count closed over by a branch came in as (s, s)):
    it must succeed, and compute what eager does. The attention is the one every family shares."""
    import torch.fx.experimental._config as fx_config
    torch.manual_seed(0)
    module = Outputs(tiny_backbone('pvt', **EVERY_KIND_ONCE['pvt'])).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad(), fx_config.patch(backed_size_oblivious=True):  # as torch.onnx's first capture
        exported = torch.export.export(module, (x,), dynamic_shapes=dynamic_image_shapes(), strict=False)
    with torch.no_grad():
        for got, want in zip(exported.module()(x), module(x), strict=True):
            assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)


def test_a_batch_of_one_exports_for_a_batch_of_one(tmp_path, one_thread):
    """From a batch-1 example the graph is reported for a batch of 1 only (a backbone's capture makes the
    batch a constant, though torch reports a wider range), so checks fitted to the ranges stay at 1."""
    module = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU()).eval()
    ranges = export_onnx(module, str(tmp_path / 'one.onnx'), ['out'], example_shape=(1, 3, 17, 19))
    assert ranges['batch'] == (1, 1)
    assert ranges['height'][1] is None


def test_export_drops_only_the_known_onnxscript_notices(caplog):
    """onnxscript's constant folding logs a WARNING for every Split it leaves unfolded (20 for InLine-Swin-T);
    our exports drop exactly those, on that logger, while they run."""
    from onnxscript.optimizer import _constant_folding

    from inline_dense.warning_filters import EXPORT_LOGGER, quiet_export
    assert _constant_folding.logger.name == EXPORT_LOGGER  # the notices still come from that logger
    with caplog.at_level(logging.WARNING, logger=EXPORT_LOGGER), quiet_export():
        _constant_folding.logger.warning('Skipping constant folding for op %s with multiple outputs.', 'Split')
        _constant_folding.logger.warning('Skipping constant folding for node %r', 'other')
    assert [r.getMessage() for r in caplog.records] == ["Skipping constant folding for node 'other'"]
    assert logging.getLogger(EXPORT_LOGGER).filters == []


def test_check_fails_loudly_on_a_mismatch(tmp_path, one_thread):
    """A file that no longer computes what the PyTorch module does is reported, with the size."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.AdaptiveAvgPool2d(2)).eval()
    replace_adaptive_pooling(module)
    path = str(tmp_path / 'conv.onnx')
    ranges = export_onnx(module, path, ['out'], example_shape=(2, 3, 17, 19))
    assert ranges['batch'][1] is None
    assert ranges['height'][1] is None
    rows = check_onnx(path, module, [(1, 3, 11, 23), (3, 3, 30, 8)], runs=1)
    assert max(r.relative_error for r in rows) < 1e-5
    with torch.no_grad():
        module[0].bias.add_(0.5)
    with pytest.raises(OnnxMismatchError, match=r'above the tolerance 1e-04.*\(3, 3, 30, 8\)'):
        check_onnx(path, module, [(3, 3, 30, 8)], runs=1)


# The toy UperNet's InLine-Swin made to hold every kind of block: InLine (stages 1-2), the mixed
# stage 3 (an InLine block, then a shifted softmax one), plain windows (stage 4); its stage grids
# at the sizes checked (stage 4: 5x6 to 6x5) are above the 4x4 window, so windows are padded.
EVERY_SWIN_BLOCK = ['model.backbone.attn_type=IIMS1', 'model.backbone.depths=[1,1,2,1]']


@pytest.mark.slow
def test_tool_exports_a_segmenter(load_tool, tmp_path, capsys, one_thread):
    """tools/export_onnx.py on the toy UperNet: image -> logits at the input size, checked at three
    sizes (batch 1 and 2) within 1e-4; --cfg-options reach the exported model (4 classes instead of
    the config's 5, and an InLine-Swin with every kind of block: this is InLine-Swin's export test)."""
    out = tmp_path / 'upernet.onnx'
    code = load_tool('export_onnx').main([
        'configs/toy/upernet_inline-swin-mini_toy-ade.py', '--out', str(out), '--runs', '1',
        '--check-shapes', '1x3x150x177', '2x3x141x166', '1x3x190x135',
        '--cfg-options', 'model.decode_head.num_classes=4', *EVERY_SWIN_BLOCK])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert 'onnxruntime matches PyTorch' in printed
    assert '2x3x141x166' in printed
    import onnx
    import onnxruntime as ort
    scopes = ' '.join(p.value for n in onnx.load(str(out)).graph.node for p in n.metadata_props)
    for block, cls in [('stages.2.blocks.0', 'layers.inline_attention.InLineAttention'),  # the mixed stage
                       ('stages.2.blocks.1', 'families.swin.window_attention.ShiftWindowMSA'),
                       ('stages.3.blocks.0', 'families.swin.window_attention.ShiftWindowMSA')]:
        assert f'segmentor.backbone.{block}.attn: inline_dense.{cls}' in scopes, block
    session = ort.InferenceSession(str(out), providers=['CPUExecutionProvider'])
    logits = session.run(None, {'image': torch.randn(2, 3, 171, 139).numpy()})[0]
    assert logits.shape == (2, 4, 171, 139)  # 4 classes (--cfg-options), at the input size


def test_tool_rejects_a_batch_one_export_shape(load_tool):
    with pytest.raises(SystemExit):
        load_tool('export_onnx').parse_args(['configs/toy/upernet_inline-swin-mini_toy-ade.py', '--out', 'x.onnx',
                                             '--export-shape', '1x3x289x291'])
    assert EXPORT_SHAPE[0] >= 2
