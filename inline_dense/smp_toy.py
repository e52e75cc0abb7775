"""A short end-to-end run outside OpenMMLab: an smp decoder on an InLine encoder trains from scratch
on the toy ADE20K data and reports mIoU with smp's metrics (``tools/train_smp_toy.py`` is the CLI).

Labels follow ADE20K: 0 (unlabelled outlines) is ignored, 1..K become classes 0..K-1. Images are
normalised with ImageNet's mean / std; training flips them horizontally at random.
"""
import math
import os.path as osp
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from glob import glob

import cv2
import numpy as np
import torch
from torch import nn

from . import registry, variants
from .smp import encoder_name, smp
from .toy_data import DEFAULT_ADE_ROOT, TOY_ADE_CLASSES, make_toy_ade

IGNORE = 255
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# small encoders (each family spec's ``small``: a preset's attention layout at about a quarter of its
# depth and width): a few minutes of CPU suffice for them to learn the toy scenes
SMALL_ENCODER = dict(drop_path_rate=0.0)
# decoder widths for the CPU: smp's defaults (256 channels at stride 4) cost several times the encoder
DECODERS = tuple(cls.__name__ for cls in smp.MODEL_ARCHITECTURES_MAPPING.values())  # smp's decoder classes
SMALL_DECODERS = {'UPerNet': dict(decoder_channels=64),
                  'FPN': dict(decoder_pyramid_channels=64, decoder_segmentation_channels=32)}


@dataclass
class ToyRun:
    """What a run measured. ``chance_miou``: predicting the most frequent training class everywhere;
    ``epochs``: the epochs that took a step (the last may be partial), one mean loss each in ``losses``."""
    miou: float
    chance_miou: float
    class_iou: dict[str, float]
    epochs: int
    steps: int
    train_seconds: float
    total_seconds: float
    losses: list[float] = field(default_factory=list)


class ToyRunError(ValueError):
    """A setting or a data file the toy run cannot use; the message says which and what to do."""


def _read(path: str, flags: int, what: str) -> np.ndarray:
    if not osp.isfile(path):
        raise ToyRunError(f'{what} {path} is missing: every image needs its annotation (same name, .png, under '
                          f'annotations/); remake the toy data with python tools/make_toy_data.py ade.')
    array = cv2.imread(path, flags)
    if array is None:
        raise ToyRunError(f'{what} {path} cannot be read as a picture (damaged, or not an image).')
    return array


def load_split(root: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Toy ADE ``split`` ('training' / 'validation') -> images (N, 3, H, W) float32 normalised,
    labels (N, H, W) int64 in 0..K-1 with ``IGNORE`` for ADE's 0. Raises :class:`ToyRunError` for a
    missing or unreadable annotation and for pictures of another size than the split's first."""
    paths = sorted(glob(osp.join(root, 'images', split, '*.jpg')))
    if not paths:
        raise FileNotFoundError(f'no images under {osp.join(root, "images", split)}: make the toy data with '
                                f'python tools/make_toy_data.py ade --root {root}')
    images, labels = [], []
    for path in paths:
        stem = osp.splitext(osp.basename(path))[0]
        image = _read(path, cv2.IMREAD_COLOR, 'image')[:, :, ::-1]
        label = _read(osp.join(root, 'annotations', split, stem + '.png'), cv2.IMREAD_GRAYSCALE, 'annotation')
        if label.shape != image.shape[:2] or (images and image.shape != images[0].shape):
            first = images[0].shape[:2] if images else image.shape[:2]
            raise ToyRunError(f'{path} is {image.shape[0]}x{image.shape[1]} with a {label.shape[0]}x{label.shape[1]} '
                              f'annotation; the toy run stacks the {split} split into one tensor, so every image '
                              f'and annotation must be {first[0]}x{first[1]} as the first ({paths[0]}).')
        images.append(image)
        labels.append(label)
    x = torch.from_numpy(np.stack(images).astype(np.float32) / 255.0).permute(0, 3, 1, 2)
    x = (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    y = torch.from_numpy(np.stack(labels).astype(np.int64)) - 1
    y[y < 0] = IGNORE
    return x.contiguous(), y


def small_encoder(variant: str) -> dict:
    """The backbone arguments of the small encoder of ``variant``'s family (its spec's ``small``,
    without stochastic depth)."""
    return dict(variants.spec_of(variant).small, **SMALL_ENCODER)


def build_model(decoder: str = 'UPerNet', variant: str = variants.EXAMPLE, num_classes: int = len(TOY_ADE_CLASSES),
                **kwargs) -> nn.Module:
    """smp ``decoder`` (a class name: 'UPerNet', 'FPN', ...) on the InLine ``variant`` encoder,
    from scratch; ``kwargs``: the decoder's arguments, the rest go on to the backbone (e.g.
    ``small_encoder(variant)``)."""
    return getattr(smp, decoder)(encoder_name(variant), encoder_weights=None, classes=num_classes, **kwargs)


@torch.no_grad()
def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, num_classes: int,
             batch_size: int = 16) -> tuple[float, list[float]]:
    """mIoU (smp.metrics, per class over the whole split, then averaged) and the per-class IoUs."""
    model.eval()
    stats = [smp.metrics.get_stats(model(images[i:i + batch_size]).argmax(1), labels[i:i + batch_size],
                                   mode='multiclass', num_classes=num_classes, ignore_index=IGNORE)
             for i in range(0, len(images), batch_size)]
    return scores(stats)


def scores(stats: list[tuple[torch.Tensor, ...]]) -> tuple[float, list[float]]:
    tp, fp, fn, tn = (torch.cat([s[k] for s in stats]) for k in range(4))
    per_class = smp.metrics.iou_score(tp.sum(0), fp.sum(0), fn.sum(0), tn.sum(0), reduction='none')
    miou = smp.metrics.iou_score(tp, fp, fn, tn, reduction='macro')
    return float(miou), [float(v) for v in per_class]


def chance_miou(train_labels: torch.Tensor, val_labels: torch.Tensor, num_classes: int) -> float:
    """mIoU of predicting the most frequent training class at every pixel."""
    counts = torch.bincount(train_labels[train_labels != IGNORE].flatten(), minlength=num_classes)
    pred = torch.full_like(val_labels, int(counts.argmax()))
    return scores([smp.metrics.get_stats(pred, val_labels, mode='multiclass', num_classes=num_classes,
                                         ignore_index=IGNORE)])[0]


def check_settings(decoder: str, variant: str, train_seconds: float, max_epochs: int, batch_size: int,
                   lr: float) -> None:
    """Raises :class:`ToyRunError` (one line, naming the setting) for what the run cannot use: a time
    budget or learning rate that is not a finite positive number, a batch of fewer than 2 images
    (smp's decoders normalise with BatchNorm, which needs 2 in training), no epochs, an unknown
    decoder or variant."""
    if not (isinstance(train_seconds, (int, float)) and math.isfinite(train_seconds) and train_seconds > 0):
        raise ToyRunError(f'the training time {train_seconds!r} s must be a finite number of seconds > 0.')
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ToyRunError(f'the learning rate {lr!r} must be a finite number > 0.')
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 2:
        raise ToyRunError(f'the batch size {batch_size!r} must be an integer >= 2: smp\'s decoders normalise with '
                          f'BatchNorm, which needs at least 2 images per training step.')
    if isinstance(max_epochs, bool) or not isinstance(max_epochs, int) or max_epochs < 1:
        raise ToyRunError(f'max_epochs={max_epochs!r} must be an integer >= 1.')
    if decoder not in DECODERS:
        raise ToyRunError(f'unknown decoder {decoder!r}; smp has {", ".join(DECODERS)} (names are case-sensitive).')
    try:
        variants.variant(variant)
    except registry.UnknownNameError as exc:
        raise ToyRunError(str(exc)) from None


def lr_at(progress: float, peak: float, warmup: float = 0.05) -> float:
    """Linear warm-up over the first ``warmup`` of the run, then cosine to 0 at ``progress`` 1."""
    if progress < warmup:
        return peak * (progress + 1e-3) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * min(1.0, (progress - warmup) / (1 - warmup))))


def train_toy(root: str | None = None, decoder: str = 'UPerNet', variant: str = variants.EXAMPLE,
              encoder_kwargs: dict | None = None, decoder_kwargs: dict | None = None,
              train_seconds: float = 150.0, max_epochs: int = 100, batch_size: int = 8, lr: float = 2e-3,
              seed: int = 0, log: Callable[[str], None] = print) -> ToyRun:
    """Trains ``decoder`` + InLine ``variant`` from scratch on the toy ADE data at ``root`` (made
    if missing; default ``data/toy_ade``) for ``train_seconds`` of wall-clock time (or
    ``max_epochs``), then evaluates mIoU on its validation split. ``encoder_kwargs`` (default
    ``small_encoder(variant)``) and ``decoder_kwargs`` (default ``SMALL_DECODERS[decoder]``) size the model.

    The run is budgeted in time, not steps, so that it ends on time on any machine: the learning
    rate (AdamW) follows warm-up + cosine over the elapsed fraction of ``train_seconds``, so a
    slower machine does fewer steps of the same schedule. Cross-entropy ignores unlabelled pixels.
    Raises :class:`ToyRunError` for settings or data it cannot use (``check_settings``,
    ``load_split``, fewer than 2 training images).
    """
    start = time.perf_counter()
    check_settings(decoder, variant, train_seconds, max_epochs, batch_size, lr)
    torch.manual_seed(seed)
    root = make_toy_ade(root or DEFAULT_ADE_ROOT)  # kept as it is when it exists
    x_train, y_train = load_split(root, 'training')
    x_val, y_val = load_split(root, 'validation')
    if len(x_train) < 2:
        raise ToyRunError(f'{osp.join(root, "images", "training")} holds {len(x_train)} image: a training step needs '
                          f'2 (BatchNorm), so nothing would train. Add images, or remake the toy data with python '
                          f'tools/make_toy_data.py ade.')
    num_classes = len(TOY_ADE_CLASSES)
    kwargs = dict(small_encoder(variant) if encoder_kwargs is None else encoder_kwargs)
    kwargs.update(SMALL_DECODERS.get(decoder, {}) if decoder_kwargs is None else decoder_kwargs)
    try:
        model = build_model(decoder, variant, num_classes, **kwargs)
    except ValueError as exc:  # e.g. DeepLabV3, which needs output stride 8 or 16
        raise ToyRunError(f'smp.{decoder} on {variant}: {exc}') from exc
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    generator = torch.Generator().manual_seed(seed)
    losses: list[float] = []
    train_start, steps, epoch, done = time.perf_counter(), 0, 0, False
    while not done and epoch < max_epochs:
        epoch += 1
        model.train()
        order = torch.randperm(len(x_train), generator=generator)
        total, count = 0.0, 0
        for i in range(0, len(order) - 1, batch_size):  # UPerNet's pooled BatchNorm needs 2 images
            progress = (time.perf_counter() - train_start) / train_seconds
            if progress >= 1:
                done = True
                break
            for group in optimizer.param_groups:
                group['lr'] = lr_at(progress, lr)
            idx = order[i:i + batch_size]
            images, labels = x_train[idx], y_train[idx]
            flip = torch.rand(len(idx), generator=generator) < 0.5
            images[flip], labels[flip] = images[flip].flip(-1), labels[flip].flip(-1)
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
            total, count = total + loss.item(), count + 1
        if count:
            losses.append(total / count)
            log(f'epoch {epoch}: loss {losses[-1]:.3f}, {steps} steps, {time.perf_counter() - train_start:.0f} s')
    trained = time.perf_counter() - train_start
    miou, per_class = evaluate(model, x_val, y_val, num_classes)
    return ToyRun(miou=miou, chance_miou=chance_miou(y_train, y_val, num_classes),
                  class_iou=dict(zip(TOY_ADE_CLASSES, per_class)), epochs=len(losses), steps=steps,
                  train_seconds=trained, total_seconds=time.perf_counter() - start, losses=losses)
