"""Builds our backbones with the settings of the authors' reference fixtures (each family spec's
``fixture``: its name, and the authors' constructor arguments in ours)."""
import os

import torch

import inline_dense.openmmlab
from inline_dense import registry

FIXTURES = os.path.join(os.path.dirname(__file__), 'data', 'fixtures')
VARIANTS = tuple(spec.fixture.name for spec in registry.FAMILIES.values())


def load_reference(variant: str) -> dict:
    return torch.load(os.path.join(FIXTURES, f'{variant}_reference.pt'), weights_only=True)


def authors_checkpoint(variant: str) -> str:
    return os.path.join(FIXTURES, f'{variant}_authors_layout.pth')


def build_reference_backbone(variant: str, checkpoint: str, **overrides) -> tuple[torch.nn.Module, dict]:
    """Our backbone with the authors' arch of ``variant``, loaded from ``checkpoint`` through init_cfg."""
    ref = load_reference(variant)
    spec = registry.family(ref['kind'])
    kwargs = dict(spec.fixture.backbone_kwargs(ref['arch']), init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
    model = getattr(inline_dense.openmmlab, spec.class_name)(**{**kwargs, **overrides})
    model.init_weights()
    return model.eval(), ref
