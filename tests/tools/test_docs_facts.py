"""What the docs say about small inputs and the demo's AP is what the code does.

docs/backbones.md and docs/installation.md said inputs under 32 px are refused, but 31x31 ran:
inputs smaller than the total stride are zero-padded to it. The README gave the demo's AP as the
same everywhere; it depends on the CPU's floating-point order."""
import re
from pathlib import Path

import pytest
import torch

from inline_dense import registry
from inline_dense.families import backbone_class

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize('family', list(registry.FAMILIES))
@pytest.mark.parametrize('hw', [(1, 1), (5, 7), (31, 31), (16, 64)])
def test_inputs_under_32_px_run_with_ceil_sized_maps(family, hw):
    spec = registry.FAMILIES[family]
    model = backbone_class(spec)(next(iter(spec.presets))).eval()
    with torch.no_grad():
        outs = model(torch.randn(1, 3, *hw))
    strides = [model.strides[i] for i in model.out_indices]  # a pyramid's 4-32; a plain ViT's last block: 16
    assert [tuple(o.shape[-2:]) for o in outs] == [(-(-hw[0] // s), -(-hw[1] // s)) for s in strides]


def test_the_docs_no_longer_say_small_inputs_are_refused():
    backbones = (ROOT / 'docs' / 'backbones.md').read_text()
    assert 'smaller than 32 pixels per side are refused' not in backbones
    assert 'smaller than 32 pixels (the total stride) per side, down to 1x1, are zero-padded' in backbones
    assert 'is smaller than 32x32' not in (ROOT / 'docs' / 'installation.md').read_text()


def test_the_readme_says_the_demo_ap_depends_on_the_cpu():
    readme = (ROOT / 'README.md').read_text()
    flat = re.sub(r'\s+', ' ', readme)
    assert "exact figures depend on the CPU's floating-point order" in flat
    assert 'at least 0.78 each, the bound its test holds it to' in flat  # the test: tests/tools/test_demo_ap.py
    assert len(readme.splitlines()) <= 250
