"""What a backbone family is, as plain data (no torch): the types of ``families/<name>/spec.py``.

A family's :class:`FamilySpec` holds every fact about it that is not its model code: its presets (the
model's ``arch_zoo``), the authors' published weights, the checkpoint keys only it has, the authors'
classification head, the outputs it gives (channels and stride of each), the mmdet softmax backbone
the benchmark compares it with, the small settings the tests and toys build, and what its configs
say. :mod:`inline_dense.registry` lists the families; everything else (the variant table, the
``inline://`` names, the timm / smp / torchvision / transformers / OpenMMLab adapters, the benchmark
zoo, the converter's detection, the config bases, the contract tests) reads the specs.
"""
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
Preset = Mapping[str, Any]


def tsinghua(file_id: str) -> str:
    """The download URL of a file the authors share on Tsinghua Cloud (their README's links)."""
    return f'https://cloud.tsinghua.edu.cn/f/{file_id}/?dl=1'


@dataclass(frozen=True)
class Weights:
    """One published checkpoint: the authors' ImageNet-1K classifier of a preset, and how they
    evaluate it (the Swin codebase's ``TEST.CROP`` by default: resize to ``input_size / crop_pct``,
    squashed, centre crop ``input_size``, bicubic, ImageNet mean / std)."""
    name: str            # 'inline_swin_t': the inline:// name, the timm model, checkpoints/<name>.pth
    preset: str          # the family preset it was trained with ('tiny')
    url: str | None   # the authors' file (LeapLabTHU/InLine README); None: local files / the cache only
    top1: float          # the authors' ImageNet-1K top-1, percent
    input_size: int = 224
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    crop_pct: float = 224 / 256
    crop_mode: str = 'squash'
    interpolation: str = 'bicubic'

    @property
    def size(self) -> str:
        """The size letter of the name: ``'inline_swin_t'`` -> ``'t'``."""
        return self.name.rsplit('_', 1)[1]


@dataclass(frozen=True)
class Output:
    """One output a backbone can give (``out_indices`` picks among them): a (B, channels, H / stride,
    W / stride) map."""
    channels: int
    stride: int


def stage_outputs(arch: Preset, strides: Sequence[int]) -> tuple[Output, ...]:
    """One output per stage of a pyramid: ``embed_dims`` per stage, or one int doubled at each
    stage (Swin, CSwin), at ``strides``."""
    embed = arch['embed_dims']
    dims = [embed * 2 ** i for i in range(len(strides))] if isinstance(embed, int) else list(embed)
    return tuple(Output(c, s) for c, s in zip(dims, strides))


@dataclass(frozen=True)
class Groups:
    """timm's ``group_matcher`` (parameter groups, e.g. for layer-wise learning-rate decay), over the
    classifier's parameter names: the stem, then the blocks (one regex with the stage number
    (``coarse``), or (regex, order) pairs (fine))."""
    stem: str
    coarse: str
    fine: tuple[tuple[str, tuple[int, ...] | None], ...]


# a pyramid's: the stem, then per stage its entry (PVT's patch / position embedding, CSwin's merge) and
# blocks, Swin's merge at its stage's end, the final norm last
STAGE_GROUPS = Groups(
    stem=r'^backbone\.(?:patch_embed|stem)\.',
    coarse=r'^backbone\.stages\.(\d+)',
    fine=((r'^backbone\.stages\.(\d+)\.(?:patch_embed|pos_embed|merge)', (0,)),
          (r'^backbone\.stages\.(\d+)\.blocks\.(\d+)', None),
          (r'^backbone\.stages\.(\d+)\.downsample', (99998,)),
          (r'^norm', (99999,))))


@dataclass(frozen=True)
class Head:
    """The authors' classification head, as timm describes a model."""
    final_norm: bool     # a LayerNorm on the last output before pooling (Swin, CSwin; not PVT)
    first_conv: str      # the classifier's first convolution (timm's ``first_conv``)
    no_weight_decay: tuple[str, ...] = ()  # parameter-name endings timm's optimizer must not decay
    groups: Groups = STAGE_GROUPS
    pool: str = 'avg'    # what the head reads: 'avg' the tokens' mean, 'token' the cls token (a ViT's)


@dataclass(frozen=True)
class Baseline:
    """The mmdet softmax backbone the benchmark builds to the same preset (``swin-t`` next to
    ``inline-swin-t``)."""
    name: str                        # the zoo's prefix: 'swin' -> 'swin-t'
    mmdet_class: str                 # in mmdet.models.backbones
    from_preset: Mapping[str, str]   # mmdet argument -> preset key
    fixed: Mapping[str, Any] = field(default_factory=dict)

    def kwargs(self, preset: Preset) -> dict[str, Any]:
        """The mmdet class's arguments for ``preset`` (sequences as lists, as mmdet's configs write them)."""
        picked = {arg: preset[key] for arg, key in self.from_preset.items()}
        return {**self.fixed, **{k: list(v) if isinstance(v, (tuple, list)) else v for k, v in picked.items()}}


@dataclass(frozen=True)
class Fixture:
    """The authors' model with random weights, pinned in ``tests/data/fixtures`` (and
    ``../shared/fixtures``): ``<name>_authors_layout.pth`` (their checkpoint) and
    ``<name>_reference.pt`` (their outputs; ``arch`` holds their constructor's arguments)."""
    name: str                        # 'inline_swin_mini'
    arguments: Mapping[str, str]     # the authors' constructor argument -> ours
    fixed: Mapping[str, Any] = field(default_factory=dict)  # more of ours (e.g. all outputs)

    def backbone_kwargs(self, authors_arch: Mapping[str, Any]) -> dict[str, Any]:
        """Our backbone's arguments for the authors' ``arch``: every output, no output norm, no
        stochastic depth (the reference holds the raw outputs)."""
        return dict({ours: authors_arch[theirs] for theirs, ours in self.arguments.items()},
                    out_norm=False, drop_path_rate=0.0, **self.fixed)


@dataclass(frozen=True)
class Configs:
    """What the family's config bases (``configs/_base_/backbones/<variant>.py``, made by
    ``tools/make_configs.py``) say beyond the weights: stochastic depth per preset, and why."""
    drop_path: Mapping[str, float]                   # detection, per preset
    drop_path_note: str                              # the comment above it
    seg_drop_path: Mapping[str, float] | None = None  # ADE20K, per preset, where it differs
    seg_drop_path_note: str = ''


@dataclass(frozen=True)
class FamilySpec:
    """Everything about a backbone family but its model code (``families/<name>/``)."""
    name: str                     # 'swin': its folder, its variants' prefix (inline_swin_*)
    title: str                    # 'Swin': InLine-Swin-T
    class_name: str               # the backbone class ('InLineSwin'): inline_dense.models, OpenMMLab's type
    presets: Mapping[str, Preset]  # the model's arch_zoo, by preset name
    weights: tuple[Weights, ...]  # the published checkpoints, smallest first
    key_patterns: tuple[str, ...]  # regexes (re.search) over checkpoint keys that only this family has
    head: Head
    outputs: Callable[[Preset], tuple[Output, ...]]  # the outputs a preset gives, by index
    tiny: Preset                  # tests: small, with every kind of block (InLine, softmax, mixed)
    every_kind_once: Preset       # tests: ``tiny`` overrides with the fewest blocks that keep every kind
    shrunk_depths: tuple[int, ...]  # tests: whole detectors fast, a preset's layout kept
    small: Preset                 # toys: a preset's attention layout at a quarter of its depth and width
    fixture: Fixture
    configs: Configs
    baseline: Baseline | None = None
    model_in: str | None = None   # the module defining ``class_name``, if not families/<name>/model.py
    #                               (a family outside the package: registry.register)

    @property
    def model_module(self) -> str:
        """Where the backbone class is defined."""
        return self.model_in or f'inline_dense.families.{self.name}.model'

    @property
    def plain(self) -> bool:
        """A plain ViT: presets give ``depth`` (one stride, its blocks the stages), not ``depths`` per stage."""
        return 'depth' in next(iter(self.presets.values()))

    def preset_outputs(self, preset: str | Preset) -> tuple[Output, ...]:
        """The outputs of a preset (by name, or an arch dict)."""
        return self.outputs(self.presets[preset] if isinstance(preset, str) else preset)

    def weights_of_preset(self, preset: str) -> list[Weights]:
        return [w for w in self.weights if w.preset == preset]

    def shrunk(self) -> dict[str, Any]:
        """The backbone arguments that give ``shrunk_depths``: ``depths`` per stage, or for a plain ViT
        (presets with ``depth``, its stages its blocks) ``depth``, their sum."""
        if self.plain:
            return dict(depth=sum(self.shrunk_depths))
        return dict(depths=self.shrunk_depths)
