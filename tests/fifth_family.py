"""A throwaway fifth backbone family, registered at run time: a pytest plugin (``-p fifth_family``,
with tests/ on ``PYTHONPATH``) that runs the family-parametrised tests on it (those a parameter of
which names it; the others are deselected).

The family, InLine-Fifth, is built here from the shared bricks of :mod:`inline_dense.layers`: a
four-stage pyramid (a 4x4 patchifying convolution, then 2x2 strided convolutions between the stages,
strides 4-32) of global InLine blocks. Its facts are a :class:`FamilySpec` like the package's;
``registry.register`` adds it after every adapter is imported (an adapter that read the families
once, at its import, would miss it). Its "authors' layout" is ours with other key names, which its converter
maps back; its fixture files (the authors' checkpoint, the reference outputs and logits) are written
at start-up into a temporary folder that ``reference_models`` is pointed at
(``INLINE_DENSE_TEST_FIXTURES``). ``tests/families/test_fifth_family.py`` runs the suite with it.
"""
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from inline_dense import registry
from inline_dense.families.spec import (
    Configs,
    FamilySpec,
    Fixture,
    Groups,
    Head,
    Output,
    Preset,
    Weights,
    stage_outputs,
)
from inline_dense.layers import padding
from inline_dense.layers.backbone import InLineBackboneBase
from inline_dense.layers.block import inline_attention, transformer_block
from inline_dense.layers.settings import resolve_settings
from inline_dense.typing import HW, StateDict


def outputs(arch: Preset) -> tuple[Output, ...]:
    return stage_outputs(arch, [4 * 2 ** i for i in range(len(arch['depths']))])


SPEC = FamilySpec(
    name='fifth',
    title='Fifth',
    class_name='InLineFifth',
    presets={
        'tiny': dict(embed_dims=(32, 64, 128, 256), depths=(1, 2, 4, 1), num_heads=(1, 2, 4, 8)),
        'small': dict(embed_dims=(48, 96, 192, 384), depths=(2, 2, 6, 2), num_heads=(1, 2, 4, 8)),
    },
    weights=tuple(Weights(f'inline_fifth_{size}', preset, f'https://example.invalid/inline_fifth_{size}.pth', top1)
                  for size, preset, top1 in (('t', 'tiny', 50.0), ('s', 'small', 60.0))),  # never downloaded
    key_patterns=(r'^patch\.', r'^patchify\.'),  # the authors' stem, ours
    head=Head(final_norm=False, first_conv='backbone.patchify.proj',
              groups=Groups(stem=r'^backbone\.patchify\.', coarse=r'^backbone\.stages\.(\d+)',
                            fine=((r'^backbone\.stages\.(\d+)\.shrink', (0,)),
                                  (r'^backbone\.stages\.(\d+)\.blocks\.(\d+)', None)))),
    outputs=outputs,
    tiny=dict(embed_dims=(16, 32, 64, 128), depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8)),
    every_kind_once=dict(depths=(1, 1, 1, 1)),  # every block is alike
    shrunk_depths=(1, 1, 1, 1),
    small=dict(embed_dims=(32, 64, 128, 256), depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8)),
    fixture=Fixture('inline_fifth_mini', dict(embed_dim='embed_dims', depths='depths', num_heads='num_heads',
                                              mlp_ratio='mlp_ratio')),
    configs=Configs(drop_path=dict(tiny=0.1, small=0.2), drop_path_note='a test family: no configs'),
    model_in=__name__,
)


# ------------------------------------------------------------------------------------------ the model
class Patchify(nn.Module):
    """A (B, C_in, H, W) map -> tokens (B, ceil(H / p) * ceil(W / p), C) and their grid: a p x p
    convolution of stride p on the map zero-padded to a multiple of p, then LayerNorm."""

    def __init__(self, in_dims: int, dims: int, patch: int) -> None:
        super().__init__()
        self.patch = patch
        self.proj = nn.Conv2d(in_dims, dims, patch, stride=patch)
        self.norm = nn.LayerNorm(dims)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, HW]:
        x = self.proj(padding.pad_to_multiple(x, self.patch))
        return self.norm(x.flatten(2).transpose(1, 2)), (x.shape[2], x.shape[3])


class FifthStage(nn.Module):
    """A 2x2 strided convolution into the stage (but the first), then its blocks."""

    def __init__(self, shrink: Patchify | None, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.shrink = shrink
        self.blocks = nn.ModuleList(blocks)

    def enter(self, x: torch.Tensor, hw: HW, valid_hw: list[HW] | None, stride: int) -> tuple[torch.Tensor, HW]:
        if self.shrink is None:
            return x, hw
        return self.shrink(x.transpose(1, 2).reshape(x.shape[0], x.shape[2], hw[0], hw[1]))

    def leave(self, x: torch.Tensor, hw: HW) -> tuple[torch.Tensor, HW]:
        return x, hw


class InLineFifth(InLineBackboneBase):
    """A test family: a pyramid of global InLine blocks (strides 4, 8, 16, 32).

    Args:
        arch: 'tiny', 'small' or a dict with embed_dims / depths / num_heads; those three override it.
        mlp_ratio, qkv_bias, kernel, attn_impl, in_channels, drop_rate, attn_drop_rate, drop_path_rate,
        out_indices, out_norm, frozen_stages, with_cp: as the package's families.
    """

    arch_zoo = SPEC.presets

    def __init__(self, arch: str | dict = 'tiny', embed_dims: Sequence[int] | None = None,
                 depths: Sequence[int] | None = None, num_heads: Sequence[int] | None = None,
                 mlp_ratio: float = 4.0, qkv_bias: bool = True, kernel: str = 'identity', attn_impl: str = 'auto',
                 in_channels: int = 3, drop_rate: float = 0.0, attn_drop_rate: float = 0.0,
                 drop_path_rate: float = 0.1, out_indices: Sequence[int] = (0, 1, 2, 3), out_norm: bool = True,
                 frozen_stages: int = -1, with_cp: bool = False) -> None:
        settings = resolve_settings(
            type(self).__name__, self.arch_zoo, arch, dict(embed_dims=embed_dims, depths=depths, num_heads=num_heads),
            in_channels=in_channels, kernel=kernel, attn_impl=attn_impl, out_indices=out_indices, out_norm=out_norm,
            frozen_stages=frozen_stages, drop_path_rate=drop_path_rate,
            options=dict(mlp_ratio=mlp_ratio, qkv_bias=qkv_bias, drop_rate=drop_rate, attn_drop_rate=attn_drop_rate,
                         with_cp=with_cp))
        dims = settings.embed_dims
        stages = []
        for i in range(settings.num_stages):
            blocks: list[nn.Module] = [
                transformer_block(settings, i, j, inline_attention(settings, i, qkv_bias=qkv_bias,
                                                                   attn_drop=attn_drop_rate, proj_drop=drop_rate),
                                  mlp_ratio=mlp_ratio, norm_eps=1e-6, with_cp=with_cp)
                for j in range(settings.depths[i])]
            stages.append(FifthStage(Patchify(dims[i - 1], dims[i], 2) if i else None, blocks))
        super().__init__(settings, dict(patchify=Patchify(in_channels, dims[0], 4)), stages,
                         strides=[4 * 2 ** i for i in range(settings.num_stages)])

    def embed_input(self, x: torch.Tensor, valid_hw: list[HW] | None) -> tuple[torch.Tensor, HW]:
        return self.patchify(x)

    @staticmethod
    def convert_pretrained(state_dict: StateDict) -> tuple[StateDict, list[str]]:
        """The "authors'" keys -> ours (``patch.`` -> ``patchify.``, ``stage{s}.merge.`` ->
        ``stages.{s-1}.shrink.``, ``stage{s}.{j}.`` -> ``stages.{s-1}.blocks.{j}.``); drops ``head``.
        Our own keys pass through."""
        out, dropped = {}, []
        for key, value in state_dict.items():
            if key.startswith('head.'):
                dropped.append(key)
                continue
            new = re.sub(r'^patch\.', 'patchify.', key)
            new = re.sub(r'^stage(\d)\.merge\.', lambda m: f'stages.{int(m.group(1)) - 1}.shrink.', new)
            out[re.sub(r'^stage(\d)\.(\d+)\.', lambda m: f'stages.{int(m.group(1)) - 1}.blocks.{m.group(2)}.', new)] \
                = value
        return out, dropped


def authors_layout(ours: StateDict) -> StateDict:
    """Our keys -> the "authors'" (what ``convert_pretrained`` undoes)."""
    def rename(key: str) -> str:
        key = re.sub(r'^patchify\.', 'patch.', key)
        key = re.sub(r'^stages\.(\d)\.shrink\.', lambda m: f'stage{int(m.group(1)) + 1}.merge.', key)
        return re.sub(r'^stages\.(\d)\.blocks\.(\d+)\.', lambda m: f'stage{int(m.group(1)) + 1}.{m.group(2)}.', key)
    return {rename(k): v for k, v in ours.items()}


# ------------------------------------------------------------------------------------------ the fixture
AUTHORS_ARCH: dict[str, Any] = dict(embed_dim=[16, 32, 48, 64], depths=[1, 2, 1, 1], num_heads=[1, 2, 3, 4],
                                    mlp_ratio=2.0, num_classes=10)
CASES = ((64, 64), (40, 72))


def write_fixture(folder: Path) -> None:
    """``<fixture>_authors_layout.pth`` and ``<fixture>_reference.pt`` in ``folder``, as
    tests/data/fixtures/README.md lays them out: a random model (every weight drawn, the norms'
    too), its stage outputs and the logits of its head (the last stage's token mean, then Linear)."""
    generator = torch.Generator().manual_seed(5)
    model = InLineFifth(**SPEC.fixture.backbone_kwargs(AUTHORS_ARCH)).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.05 + (param == 1) * 1.0)
    head_weight = torch.randn(AUTHORS_ARCH['num_classes'], AUTHORS_ARCH['embed_dim'][-1], generator=generator) * 0.1
    head_bias = torch.randn(AUTHORS_ARCH['num_classes'], generator=generator) * 0.1
    cases = []
    with torch.no_grad():
        for hw in CASES:
            x = torch.randn(1, 3, *hw, generator=generator)
            stages = [s.contiguous() for s in model(x)]
            cases.append(dict(input=x, stages=stages, logits=stages[-1].mean((2, 3)) @ head_weight.T + head_bias))
    state = dict(authors_layout(model.state_dict()), **{'head.weight': head_weight, 'head.bias': head_bias})
    name = SPEC.fixture.name
    torch.save(dict(model=state, epoch=0, max_accuracy=0.0), folder / f'{name}_authors_layout.pth')
    torch.save(dict(variant=name, kind=SPEC.name, arch=AUTHORS_ARCH, cases=cases), folder / f'{name}_reference.pt')


# ------------------------------------------------------------------------------------------ the plugin
def register() -> Path:
    """Imports every adapter, then registers the family and writes its fixture into a new temporary
    folder, which ``reference_models.MORE_FIXTURES`` names. Returns that folder."""
    # the adapters first: each must take a family registered after it was imported
    import inline_dense.openmmlab
    import inline_dense.timm
    import inline_dense.torchvision_detection
    with contextlib.suppress(ImportError):  # smp missing or Python < 3.10: its tests skip
        import inline_dense.smp  # noqa: F401
    registry.register(SPEC)
    from reference_models import MORE_FIXTURES  # after: it lists the families' fixtures
    folder = Path(tempfile.mkdtemp(prefix='inline_fifth_'))
    write_fixture(folder)
    os.environ[MORE_FIXTURES] = os.pathsep.join(filter(None, (os.environ.get(MORE_FIXTURES), str(folder))))
    return folder


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before tests/conftest.py and helpers.py read the registry."""
    early_config.stash[FOLDER] = register()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keeps the tests parametrised by the family (its name, class name, a variant's or its fixture's
    name is a parameter value); deselects the rest."""
    names = {SPEC.name, SPEC.class_name, SPEC.fixture.name, *(w.name for w in SPEC.weights)}
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, 'callspec', None), 'params', {})
        (keep if any(isinstance(v, str) and v in names for v in params.values()) else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = config.stash.get(FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


FOLDER = pytest.StashKey[Path]()
