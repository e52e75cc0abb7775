"""A short end-to-end run outside OpenMMLab: an smp decoder on an InLine encoder trains from scratch
on the toy ADE20K data and reports mIoU with smp's metrics (``tools/train_smp_toy.py`` is the CLI).

Labels follow ADE20K: 0 (unlabelled outlines) is ignored, 1..K become classes 0..K-1. Images are
normalised with ImageNet's mean / std; training flips them horizontally at random.
"""
import math
import os.path as osp
import time
from dataclasses import dataclass, field
from glob import glob
from typing import Callable, Dict, List, Optional, Tuple

import cv2
import numpy as np
import torch
from torch import nn

from .models.classifier import VARIANTS
from .smp import encoder_name, smp
from .toy_data import DEFAULT_ADE_ROOT, TOY_ADE_CLASSES, make_toy_ade

IGNORE = 255
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# small encoders (a preset's attention layout at about a quarter of its depth and width): a few
# minutes of CPU suffice for them to learn the toy scenes
SMALL_ENCODER = dict(embed_dims=32, depths=(1, 1, 2, 1), num_heads=(1, 2, 4, 8), drop_path_rate=0.0)
SMALL_HEADS = {'cswin': (2, 2, 4, 8)}  # CSwin's stripe stages split their heads in two branches
# decoder widths for the CPU: smp's defaults (256 channels at stride 4) cost several times the encoder
SMALL_DECODERS = {'UPerNet': dict(decoder_channels=64),
                  'FPN': dict(decoder_pyramid_channels=64, decoder_segmentation_channels=32)}


@dataclass
class ToyRun:
    """What a run measured. ``chance_miou``: predicting the most frequent training class everywhere."""
    miou: float
    chance_miou: float
    class_iou: Dict[str, float]
    epochs: int
    steps: int
    train_seconds: float
    total_seconds: float
    losses: List[float] = field(default_factory=list)


def load_split(root: str, split: str) -> Tuple[torch.Tensor, torch.Tensor]:
    """Toy ADE ``split`` ('training' / 'validation') -> images (N, 3, H, W) float32 normalised,
    labels (N, H, W) int64 in 0..K-1 with ``IGNORE`` for ADE's 0."""
    paths = sorted(glob(osp.join(root, 'images', split, '*.jpg')))
    if not paths:
        raise FileNotFoundError(f'no images under {osp.join(root, "images", split)}: make the toy data with '
                                f'python tools/make_toy_data.py ade --root {root}')
    images, labels = [], []
    for path in paths:
        stem = osp.splitext(osp.basename(path))[0]
        images.append(cv2.imread(path, cv2.IMREAD_COLOR)[:, :, ::-1])
        labels.append(cv2.imread(osp.join(root, 'annotations', split, stem + '.png'), cv2.IMREAD_GRAYSCALE))
    x = torch.from_numpy(np.stack(images).astype(np.float32) / 255.0).permute(0, 3, 1, 2)
    x = (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    y = torch.from_numpy(np.stack(labels).astype(np.int64)) - 1
    y[y < 0] = IGNORE
    return x.contiguous(), y


def small_encoder(variant: str) -> dict:
    """The backbone arguments of the small encoder of ``variant``'s family (``SMALL_ENCODER``)."""
    family = VARIANTS[variant][0] if variant in VARIANTS else ''
    return dict(SMALL_ENCODER, num_heads=SMALL_HEADS.get(family, SMALL_ENCODER['num_heads']))


def build_model(decoder: str = 'UPerNet', variant: str = 'inline_swin_t', num_classes: int = len(TOY_ADE_CLASSES),
                **kwargs) -> nn.Module:
    """smp ``decoder`` (a class name: 'UPerNet', 'FPN', ...) on the InLine ``variant`` encoder,
    from scratch; ``kwargs``: the decoder's arguments, the rest go on to the backbone (e.g.
    ``small_encoder(variant)``)."""
    return getattr(smp, decoder)(encoder_name(variant), encoder_weights=None, classes=num_classes, **kwargs)


@torch.no_grad()
def evaluate(model: nn.Module, images: torch.Tensor, labels: torch.Tensor, num_classes: int,
             batch_size: int = 16) -> Tuple[float, List[float]]:
    """mIoU (smp.metrics, per class over the whole split, then averaged) and the per-class IoUs."""
    model.eval()
    stats = [smp.metrics.get_stats(model(images[i:i + batch_size]).argmax(1), labels[i:i + batch_size],
                                   mode='multiclass', num_classes=num_classes, ignore_index=IGNORE)
             for i in range(0, len(images), batch_size)]
    return scores(stats)


def scores(stats: List[Tuple[torch.Tensor, ...]]) -> Tuple[float, List[float]]:
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


def lr_at(progress: float, peak: float, warmup: float = 0.05) -> float:
    """Linear warm-up over the first ``warmup`` of the run, then cosine to 0 at ``progress`` 1."""
    if progress < warmup:
        return peak * (progress + 1e-3) / warmup
    return peak * 0.5 * (1 + math.cos(math.pi * min(1.0, (progress - warmup) / (1 - warmup))))


def train_toy(root: Optional[str] = None, decoder: str = 'UPerNet', variant: str = 'inline_swin_t',
              encoder_kwargs: Optional[dict] = None, decoder_kwargs: Optional[dict] = None,
              train_seconds: float = 150.0, max_epochs: int = 100, batch_size: int = 8, lr: float = 2e-3,
              seed: int = 0, log: Callable[[str], None] = print) -> ToyRun:
    """Trains ``decoder`` + InLine ``variant`` from scratch on the toy ADE data at ``root`` (made
    if missing; default ``data/toy_ade``) for ``train_seconds`` of wall-clock time (or
    ``max_epochs``), then evaluates mIoU on its validation split. ``encoder_kwargs`` (default
    ``small_encoder(variant)``) and ``decoder_kwargs`` (default ``SMALL_DECODERS[decoder]``) size the model.

    The run is budgeted in time, not steps, so that it ends on time on any machine: the learning
    rate (AdamW) follows warm-up + cosine over the elapsed fraction of ``train_seconds``, so a
    slower machine does fewer steps of the same schedule. Cross-entropy ignores unlabelled pixels.
    """
    start = time.perf_counter()
    torch.manual_seed(seed)
    root = make_toy_ade(root or DEFAULT_ADE_ROOT)  # kept as it is when it exists
    x_train, y_train = load_split(root, 'training')
    x_val, y_val = load_split(root, 'validation')
    num_classes = len(TOY_ADE_CLASSES)
    kwargs = dict(small_encoder(variant) if encoder_kwargs is None else encoder_kwargs)
    kwargs.update(SMALL_DECODERS.get(decoder, {}) if decoder_kwargs is None else decoder_kwargs)
    model = build_model(decoder, variant, num_classes, **kwargs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    generator = torch.Generator().manual_seed(seed)
    losses: List[float] = []
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
                  class_iou=dict(zip(TOY_ADE_CLASSES, per_class)), epochs=epoch, steps=steps,
                  train_seconds=trained, total_seconds=time.perf_counter() - start, losses=losses)
