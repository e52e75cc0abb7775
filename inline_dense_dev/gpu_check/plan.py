"""What the GPU check measures and at which sizes: the real plan for a GPU, and the dry run's
tiny one, which walks the same code on a CPU in well under two minutes."""
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from inline_dense import variants
from inline_dense.typing import HW

STEPS = ('ops', 'deform_attn', 'attention', 'backbones', 'detector', 'query_heads', 'toy')
# Swin-T's stage 1 and stage 3 attention: (channels, heads, tokens grid at 1600x2688 input).
STAGE1 = (96, 3, (400, 672))
STAGE3 = (384, 12, (100, 168))
# every registered family's first variant, then the mmdet softmax backbone of its preset where it has one
BACKBONES = variants.zoo_defaults()
DETECTORS = {'mask-rcnn inline-swin-t': 'configs/mask_rcnn/mask-rcnn_inline-swin-t_fpn_1x_coco.py',
             'mask-rcnn swin-t': 'mmdet::swin/mask-rcnn_swin-t-p4-w7_fpn_1x_coco.py'}
# the query-based heads' training steps: config, input size (Mask2Former's lsj crop), options
QUERY_HEADS = {
    'dino inline-swin-t': dict(config='configs/dino/dino-4scale_inline-swin-t_8xb2-12e_coco.py', size=(800, 1344)),
    'mask2former inline-swin-t': dict(config='configs/mask2former/mask2former_inline-swin-t_8xb2-lsj-50e_coco.py',
                                      size=(1024, 1024))}


@dataclass
class CheckPlan:
    """Sizes and repetitions of every step; ``device`` 'cuda' or 'cpu'.

    ``attn_shapes``: name -> (channels, heads, (h, w)) of the InLine layers timed;
    ``attn_error``: the one compared with the CPU reference (batch 1) and checked finite.
    ``amp_dtype``: autocast dtype of the backbone and detector steps; ``fp16_dtype``: of the
    detector's loss-scaled steps. The CPU dry run sets both to float32 (autocast off, the
    GradScaler still on), to stay within its time: a float16 Mask R-CNN step runs ~50x slower on
    a CPU (and torchvision's CPU RoIAlign backward has no bfloat16 kernel of its own). The
    attention step runs both autocasts on the CPU too.
    ``deform_layouts``: random level layouts on which the stand-in's deformable attention is
    compared with mmcv's pure function; ``deform_size``: the image size of the DINO encoder
    layout where both are compared and timed. ``query_heads``: label -> dict(config, size,
    options) of the DINO / Mask2Former training steps.
    ``threads``: torch CPU threads of the workers (None: torch's default).
    """
    device: str = 'cuda'
    dry_run: bool = False
    fixtures: str = ''
    out_dir: str = ''
    warmup: int = 3
    runs: int = 10
    batch: int = 2
    threads: int | None = None
    amp_dtype: str = 'bfloat16'
    fp16_dtype: str = 'float16'
    attn_error: tuple[int, int, HW] = STAGE1
    attn_shapes: dict[str, tuple[int, int, HW]] = field(default_factory=lambda: {'stage1': STAGE1,
                                                                                 'stage3': STAGE3})
    backbones: tuple[str, ...] = BACKBONES
    backbone_sizes: tuple[HW, ...] = ((800, 1344), (1600, 2688))
    detectors: dict[str, str] = field(default_factory=lambda: dict(DETECTORS))
    detector_size: HW = (800, 1344)
    detector_options: dict[str, Any] = field(default_factory=dict)  # merged into both detector configs
    fp16_steps: int = 8  # a step that overflows halves the scale: room for it to settle
    deform_layouts: int = 16
    deform_size: HW = (800, 1344)
    query_heads: dict[str, dict[str, Any]] = field(default_factory=lambda: {k: dict(v) for k, v in QUERY_HEADS.items()})
    toy_args: list[str] = field(default_factory=list)
    toy_data: dict[str, int] = field(default_factory=dict)
    # seconds each step may run (the whole check is also cut at its time limit)
    budgets: dict[str, float] = field(default_factory=lambda: dict(ops=60, deform_attn=60, attention=90,
                                                                   backbones=150, detector=100, query_heads=100,
                                                                   toy=150))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> 'CheckPlan':
        return cls(**data)


def gpu_plan(fixtures: str, out_dir: str, device: str = 'cuda') -> CheckPlan:
    """The check as the issue asks it on an H200: detection resolutions, batch 2."""
    return CheckPlan(device=device, fixtures=fixtures, out_dir=out_dir)


def dry_run_plan(fixtures: str, out_dir: str, device: str = 'cpu') -> CheckPlan:
    """The same steps at toy sizes, one timed run each (no warm-up), the toy demo cut to 2 iterations on 8
    images, the query heads at 64x96 / 64x64, one CPU thread (the tensors are tiny and the cores may be
    shared)."""
    return CheckPlan(
        device=device, dry_run=True, fixtures=fixtures, out_dir=out_dir, warmup=0, runs=1, threads=1,
        amp_dtype='float32', fp16_dtype='float32',
        attn_error=(96, 3, (12, 20)),
        attn_shapes={'stage1': (96, 3, (12, 20)), 'stage3': (384, 12, (3, 5))},
        backbone_sizes=((32, 64), (64, 64)), detector_size=(64, 96), fp16_steps=1,
        detector_options={'model.train_cfg.rcnn.sampler.num': 64, 'model.train_cfg.rpn_proposal.max_per_img': 100},
        toy_args=['--max-iters', '2', '--num-pictures', '1', '--cfg-options', 'train_dataloader.batch_size=2',
                  'train_dataloader.num_workers=0', 'train_dataloader.persistent_workers=False',
                  'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False',
                  'default_hooks.logger.interval=1'],
        toy_data=dict(num_train=8, num_val=3, image_size=64),
        deform_layouts=4, deform_size=(64, 96),
        # DINO keeps num_queries encoder tokens (a 64x96 image has 128); Mask2Former's lsj pad
        # to 1024x1024 cut to the dry run's size
        query_heads={'dino inline-swin-t': dict(QUERY_HEADS['dino inline-swin-t'], size=(64, 96),
                                                options={'model.num_queries': 50}),
                     'mask2former inline-swin-t': dict(QUERY_HEADS['mask2former inline-swin-t'], size=(64, 64),
                                                       options={'model.data_preprocessor.batch_augments.0.size':
                                                                (64, 64)})},
        budgets=dict(ops=60, deform_attn=60, attention=60, backbones=90, detector=90, query_heads=90, toy=90))


def fixture_path(plan: CheckPlan, name: str) -> str:
    path = os.path.join(plan.fixtures, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{path} not found: prepare the wheel folder (python tools/gpu_check.py --prepare '
                                f'gpu_wheels) and pass --wheels gpu_wheels, or --fixtures DIR holding {name}.')
    return path


def resolve_detector_config(path: str, repo_root: str) -> str | None:
    """A config path relative to the checkout made absolute; 'pkg::' paths are left as they are."""
    return path if '::' in path else os.path.join(repo_root, path)
