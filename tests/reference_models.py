"""Builds our backbones with the settings of the authors' reference fixtures (each family spec's
``fixture``: its name, and the authors' constructor arguments in ours)."""
import os

import torch

import inline_dense.openmmlab
from inline_dense import registry

FIXTURES = os.path.join(os.path.dirname(__file__), 'data', 'fixtures')
MORE_FIXTURES = 'INLINE_DENSE_TEST_FIXTURES'
"""The environment variable naming more folders of fixtures (``os.pathsep`` between them): those a
family registered at run time writes (tests/fifth_family.py)."""
VARIANTS = tuple(spec.fixture.name for spec in registry.FAMILIES.values())


def fixture_file(name: str) -> str:
    """The fixture file ``name``: in tests/data/fixtures, else in a folder of ``MORE_FIXTURES``."""
    folders = [FIXTURES, *(f for f in os.environ.get(MORE_FIXTURES, '').split(os.pathsep) if f)]
    return next((p for p in (os.path.join(f, name) for f in folders) if os.path.exists(p)),
                os.path.join(FIXTURES, name))


def load_reference(variant: str) -> dict:
    return torch.load(fixture_file(f'{variant}_reference.pt'), weights_only=True)


def authors_checkpoint(variant: str) -> str:
    return fixture_file(f'{variant}_authors_layout.pth')


def build_reference_backbone(variant: str, checkpoint: str, **overrides) -> tuple[torch.nn.Module, dict]:
    """Our backbone with the authors' arch of ``variant``, loaded from ``checkpoint`` through init_cfg."""
    ref = load_reference(variant)
    spec = registry.family(ref['kind'])
    kwargs = dict(spec.fixture.backbone_kwargs(ref['arch']), init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
    model = getattr(inline_dense.openmmlab, spec.class_name)(**{**kwargs, **overrides})
    model.init_weights()
    return model.eval(), ref
