"""``ToyCocoDataset``, ``ToyCocoPanopticDataset`` (mmdet), ``ToyADE20KDataset`` and
``ToyCityscapesDataset`` (mmseg): the real dataset classes, with the toy classes as metainfo
(Cityscapes keeps its 19), that generate their folder when it is missing.

Import this module (e.g. ``custom_imports=dict(imports=['inline_dense.openmmlab.toy_datasets'])``)
to register them; a registry whose package is not installed is skipped.
"""
import os
from collections.abc import Callable
from typing import ClassVar

from mmengine.dist import barrier, is_distributed

from ..toy_data.ade import DEFAULT_ADE_ROOT, TOY_ADE_CLASSES, TOY_ADE_PALETTE, make_toy_ade
from ..toy_data.cityscapes import DEFAULT_CITYSCAPES_ROOT, make_toy_cityscapes
from ..toy_data.coco import DEFAULT_COCO_ROOT, TOY_COCO_CLASSES, TOY_COCO_PALETTE, make_toy_coco
from ..toy_data.coco_panoptic import (
    DEFAULT_COCO_PANOPTIC_ROOT,
    TOY_PANOPTIC_CLASSES,
    TOY_PANOPTIC_PALETTE,
    TOY_PANOPTIC_STUFF,
    TOY_PANOPTIC_THINGS,
    make_toy_coco_panoptic,
)
from ..toy_data.folder import read_stamp


def ensure_toy_folder(make: Callable[..., str], data_root: str, toy_data: dict | None) -> None:
    """Generates ``data_root`` with ``make(data_root, **toy_data)`` unless it holds toy data already
    (made by this version of the generator; other settings are kept).

    In a distributed run the first process of each machine writes it while the others
    wait (the write is a single rename, so machines sharing a disk are safe too).
    """
    # torchrun's LOCAL_RANK (mmengine's get_local_rank needs a local process group it does not make)
    local_rank = int(os.environ.get('LOCAL_RANK', 0)) if is_distributed() else 0
    if local_rank == 0:
        make(data_root, **(toy_data or {}))
    barrier()
    if read_stamp(data_root) is None:
        raise FileNotFoundError(f'toy data folder {data_root} is missing after generation; '
                                f'generate it with: python tools/make_toy_data.py')


class ToyFolderMixin:
    """Before the real dataset class reads ``data_root``, generates it with ``make_toy`` if missing.

    Args:
        data_root: the folder (default ``default_root``, relative to the working directory).
        toy_data: keyword arguments of ``make_toy`` used when the folder is generated.
        *args, **kwargs: as the dataset class.
    """

    make_toy: Callable[..., str]
    default_root: str

    def __init__(self, *args, data_root: str | None = None, toy_data: dict | None = None, **kwargs) -> None:
        data_root = data_root or self.default_root
        ensure_toy_folder(type(self).make_toy, data_root, toy_data)
        super().__init__(*args, data_root=data_root, **kwargs)


try:
    from mmdet.datasets import CocoDataset, CocoPanopticDataset
    from mmdet.registry import DATASETS as DET_DATASETS
except ImportError:  # mmdet not installed: no detection toy dataset
    CocoDataset = CocoPanopticDataset = None

try:
    from mmseg.datasets import ADE20KDataset, CityscapesDataset
    from mmseg.registry import DATASETS as SEG_DATASETS
except ImportError:  # mmseg not installed: no segmentation toy dataset
    ADE20KDataset = CityscapesDataset = None

if CocoDataset is not None:

    @DET_DATASETS.register_module()
    class ToyCocoDataset(ToyFolderMixin, CocoDataset):
        """mmdet's CocoDataset on the toy COCO folder (default ``data/toy_coco``), generated on
        first use with ``make_toy_coco(data_root, **toy_data)``."""

        METAINFO: ClassVar[dict] = dict(classes=TOY_COCO_CLASSES, palette=TOY_COCO_PALETTE)
        make_toy = staticmethod(make_toy_coco)
        default_root = DEFAULT_COCO_ROOT

if ADE20KDataset is not None:

    @SEG_DATASETS.register_module()
    class ToyADE20KDataset(ToyFolderMixin, ADE20KDataset):
        """mmseg's ADE20KDataset (reduce_zero_label=True) on the toy ADE folder (default
        ``data/toy_ade``), generated on first use with ``make_toy_ade(data_root, **toy_data)``."""

        METAINFO: ClassVar[dict] = dict(classes=TOY_ADE_CLASSES, palette=TOY_ADE_PALETTE)
        make_toy = staticmethod(make_toy_ade)
        default_root = DEFAULT_ADE_ROOT

if CocoPanopticDataset is not None:

    @DET_DATASETS.register_module()
    class ToyCocoPanopticDataset(ToyFolderMixin, CocoPanopticDataset):
        """mmdet's CocoPanopticDataset on the toy COCO panoptic folder (default ``data/toy_coco_panoptic``),
        generated on first use with ``make_toy_coco_panoptic(data_root, **toy_data)``: three things
        (circle, square, triangle) and two stuff classes (sky, ground)."""

        METAINFO: ClassVar[dict] = dict(classes=TOY_PANOPTIC_CLASSES, thing_classes=TOY_PANOPTIC_THINGS,
                                        stuff_classes=TOY_PANOPTIC_STUFF, palette=TOY_PANOPTIC_PALETTE)
        make_toy = staticmethod(make_toy_coco_panoptic)
        default_root = DEFAULT_COCO_PANOPTIC_ROOT

if CityscapesDataset is not None:

    @SEG_DATASETS.register_module()
    class ToyCityscapesDataset(ToyFolderMixin, CityscapesDataset):
        """mmseg's CityscapesDataset (its 19 classes and file suffixes) on the toy Cityscapes folder
        (default ``data/toy_cityscapes``), generated on first use with
        ``make_toy_cityscapes(data_root, **toy_data)``."""

        make_toy = staticmethod(make_toy_cityscapes)
        default_root = DEFAULT_CITYSCAPES_ROOT
