#!/usr/bin/env python
"""Writes what the family specs determine in configs/ and the docs, so that it is never edited by hand:

- ``configs/_base_/backbones/inline-<family>-<size>.py``: one backbone base per published variant
  (type, preset, pretrained checkpoint, output channels, stochastic depth), from the family's spec
  (``inline_dense/families/<name>/spec.py``);
- the leaf configs ``configs/<head>/<recipe>_inline-<family>-<size>_<schedule>.py``: :data:`LEAVES`, one row
  per recipe and family (recipe x variants), each config its two bases and the model's channel entries;
  the configs a recipe of their own makes different (``configs/toy``) are written by hand;
- ``configs/metafile.yml``: every config outside ``_base_`` folders, mmdet-style (``Collections``,
  ``Models``): its model, backbone, data, schedule, recipe and pretrained checkpoint;
- the Markdown tables (:mod:`inline_dense_dev.tables`): the model tables of README.md ("Configs") and
  docs/configs.md, read from the metafile; the presets (docs/backbones.md), the published checkpoints
  (docs/checkpoints.md, checkpoints/README.md) and the fixtures (tests/data/fixtures/README.md), read
  from the specs: each between ``<!-- generated table: ... -->`` and ``<!-- end of generated table -->``.

    python tools/make_configs.py           # writes every file that differs, names it
    python tools/make_configs.py --check   # writes nothing; exits 1 naming each file that differs

A new family: add its spec, run this, commit what it writes (docs/adding_a_family.md). The tests
(tests/tools/test_make_configs.py) fail while a generated file differs from the committed one.
"""
import argparse
import ast
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _checkout  # noqa: F401  (the checkout on sys.path: inline_dense_dev)
import yaml  # PyYAML: mmengine's dependency

from inline_dense import registry, variants
from inline_dense.families.spec import FamilySpec, Weights
from inline_dense_dev.tables import (
    config_table,
    fixtures_table,
    folder_table,
    hand_placed_table,
    preset_table,
    read_models,
    weights_table,
    with_table,
)

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = ROOT / 'configs'
BACKBONES = CONFIGS / '_base_' / 'backbones'
METAFILE = CONFIGS / 'metafile.yml'
PAPER = dict(URL='https://arxiv.org/abs/2412.06590',
             Title='Bridging the Divide: Reconsidering Softmax and Linear Attention')

# config folder -> (the model, its task by the kind of data it trains on): the heads' vocabulary, not a family's
HEADS: dict[str, tuple[str, dict[str, str]]] = {
    'mask_rcnn': ('Mask R-CNN + FPN', dict(objects='Instance Segmentation')),
    'cascade_rcnn': ('Cascade Mask R-CNN + FPN', dict(objects='Instance Segmentation')),
    'retinanet': ('RetinaNet + FPN', dict(objects='Object Detection')),
    'dino': ('DINO-4scale', dict(objects='Object Detection')),
    'mask2former': ('Mask2Former', dict(objects='Instance Segmentation', panoptic='Panoptic Segmentation',
                                        semantic='Semantic Segmentation')),
    'sem_fpn': ('Semantic FPN', dict(semantic='Semantic Segmentation')),
    'upernet': ('UperNet', dict(semantic='Semantic Segmentation')),
    'vitdet': ('ViTDet: Mask R-CNN / RetinaNet + simple pyramid',
               dict(objects='Instance Segmentation / Object Detection')),
}
# configs/vitdet/ holds two detectors: each config's own model, by its name's start
VITDET = {'mask-rcnn_': ('Mask R-CNN + simple pyramid (ViTDet)', dict(objects='Instance Segmentation')),
          'retinanet_': ('RetinaNet + simple pyramid (ViTDet)', dict(objects='Object Detection'))}
# The data part of a config name (its last, less a crop size: 'ade20k-512x512' -> 'ade20k') -> the
# training data the metafile names and its kind: objects (boxes, instance masks), panoptic (things and
# stuff), semantic (a class per pixel), the key of a head's task in HEADS.
DATA = {'coco': ('COCO', 'objects'), 'coco-panoptic': ('COCO', 'panoptic'), 'ade20k': ('ADE20K', 'semantic'),
        'cityscapes': ('Cityscapes', 'semantic'), 'toy-coco': ('toy COCO', 'objects'),
        'toy-coco-panoptic': ('toy COCO panoptic', 'panoptic'), 'toy-ade': ('toy ADE20K', 'semantic'),
        'toy-cityscapes': ('toy Cityscapes', 'semantic')}
NECKS = ('fpn', 'simple-fpn')  # name parts between the backbone and the schedule
BACKBONE = re.compile(r'_inline-([a-z]+)-([a-z]+)_')  # 'mask-rcnn_inline-swin-t_fpn_1x_coco' -> swin, t


# ----------------------------------------------------------------------------- backbone bases
def backbone_base_name(weights: Weights) -> str:
    """``inline_swin_t`` -> ``inline-swin-t.py``."""
    return weights.name.replace('_', '-') + '.py'


def backbone_base(spec: FamilySpec, weights: Weights) -> str:
    """The text of ``configs/_base_/backbones/<variant>.py``."""
    outputs, title = spec.preset_outputs(weights.preset), variants.title(weights.name)
    strides = ', '.join(str(o.stride) for o in outputs)
    if len({o.stride for o in outputs}) == 1:  # a plain ViT: one output per block
        strides = f'each {outputs[0].stride}: one per block'
    lines = [
        f'# {title} backbone: the settings every config for this variant shares.',
        f'# Generated by tools/make_configs.py from inline_dense/families/{spec.name}/spec.py: edit the spec.',
        f"# Pretrained: the authors' ImageNet-1K checkpoint (top-1 {weights.top1}% as they report), by its",
        f'# short name inline://{weights.name}: checkpoints/{variants.file_name(weights.name)} if that file '
        f'exists, else',
        '# the download cache, else downloaded (checkpoints/README.md). To use another file, pass',
        '#   --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.pth',
        # one line: the bases of all variants differ only in these values, which the spec holds
        f'inline_backbone = dict(type={spec.class_name!r}, arch={weights.preset!r},',
        f"                       init_cfg=dict(type='Pretrained', checkpoint='inline://{weights.name}'))",
        f'# Output channels of the {len(outputs)} outputs of {title} (strides {strides}): the neck / head inputs.',
        f'inline_channels = {[o.channels for o in outputs]}',
        *_wrapped_comment(f'Stochastic depth of {title} for detection: {spec.configs.drop_path_note}.'),
        f'inline_drop_path_rate = {spec.configs.drop_path[weights.preset]}',
    ]
    if spec.configs.seg_drop_path is not None:
        lines += [*_wrapped_comment(f'Stochastic depth of {title} for ADE20K (UperNet, Semantic FPN, Mask2Former): '
                                    f'{spec.configs.seg_drop_path_note}.'),
                  f'inline_seg_drop_path_rate = {spec.configs.seg_drop_path[weights.preset]}']
    return '\n'.join(lines) + '\n'


def _wrapped_comment(text: str, width: int = 100) -> list[str]:
    lines, line = [], '#'
    for word in text.split():
        if len(line) + 1 + len(word) > width:
            lines.append(line)
            line = '#'
        line += ' ' + word
    return [*lines, line]


# ----------------------------------------------------------------------------- leaf configs
# The model's backbone entry, and the necks' and heads' channel entries, of the leaf configs
DET = 'backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_drop_path_rate)'
DET_W7 = 'backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_drop_path_rate, window_size=7)'
SEG = 'backbone=dict(_base_.inline_backbone, drop_path_rate=_base_.inline_seg_drop_path_rate)'
AS_IS = 'backbone=_base_.inline_backbone'  # the recipe sets the stochastic depth
M2F_SWIN = 'backbone=dict(_base_.inline_backbone, drop_path_rate=0.3, window_size=7)'  # mmdet's / mmseg's Swin
FPN = ('neck=dict(in_channels=_base_.inline_channels)',)
FPN_1 = ('neck=dict(in_channels=_base_.inline_channels[1:])',)  # stages 1-3: the recipe's out_indices
UPER = ('decode_head=dict(in_channels=_base_.inline_channels)',
        'auxiliary_head=dict(in_channels=_base_.inline_channels[2])')
UPER_MLN = ('neck=dict(in_channels=_base_.inline_channels[:4], out_channels=_base_.inline_channels[-1])',
            'decode_head=dict(in_channels=_base_.inline_channels[:4])',
            'auxiliary_head=dict(in_channels=_base_.inline_channels[-1])')
SIMPLE_FPN = ('neck=dict(backbone_channel=_base_.inline_channels[-1])',)
M2F_MMDET = ('panoptic_head=dict(in_channels=_base_.inline_channels)',)
M2F_MMSEG = ('decode_head=dict(in_channels=_base_.inline_channels)',)


@dataclass(frozen=True)
class Leaves:
    """One row of :data:`LEAVES`: the recipe ``configs/_base_/recipes/<recipe>.py`` with each size of
    ``sizes`` of ``family``, each written to ``configs/<folder>/<recipe, 'inline' -> 'inline-<family>-<size>'>.py``:
    its two bases and the model's ``backbone`` and channel entries (``parts``)."""
    folder: str
    recipe: str
    family: str
    sizes: str
    backbone: str
    parts: tuple[str, ...]

    def names(self) -> list[tuple[str, str]]:
        """(size, config file name) of each leaf."""
        stem = re.sub(rf'_inline(-{self.family})?_', '_inline-{}_', self.recipe, count=1)
        return [(size, stem.format(f'{self.family}-{size}') + '.py') for size in self.sizes]


# The leaf configs: each recipe x variant, the recipe's schedule in its name. A config outside this
# table is written by hand because its recipe really differs (configs/toy).
LEAVES = (
    Leaves('mask_rcnn', 'mask-rcnn_inline-swin_fpn_1x_coco', 'swin', 'tsb', DET, FPN),
    Leaves('mask_rcnn', 'mask-rcnn_inline-swin_fpn_ms-crop-3x_coco', 'swin', 'ts', DET, FPN),
    Leaves('mask_rcnn', 'mask-rcnn_inline-pvt_fpn_1x_coco', 'pvt', 'tsml', DET, FPN),
    Leaves('mask_rcnn', 'mask-rcnn_inline-cswin_fpn_1x_coco', 'cswin', 'tsb', DET, FPN),
    Leaves('mask_rcnn', 'mask-rcnn_inline-cswin_fpn_ms-crop-3x_coco', 'cswin', 'tsb', DET, FPN),
    Leaves('cascade_rcnn', 'cascade-mask-rcnn_inline-swin_fpn_1x_coco', 'swin', 't', DET, FPN),
    Leaves('cascade_rcnn', 'cascade-mask-rcnn_inline-swin_fpn_ms-crop-3x_coco', 'swin', 'tsb', DET, FPN),
    Leaves('cascade_rcnn', 'cascade-mask-rcnn_inline-cswin_fpn_ms-crop-3x_coco', 'cswin', 'tsb', DET, FPN),
    Leaves('retinanet', 'retinanet_inline-swin_fpn_1x_coco', 'swin', 't', DET, FPN_1),
    Leaves('retinanet', 'retinanet_inline-pvt_fpn_1x_coco', 'pvt', 'tsml', DET, FPN_1),
    Leaves('dino', 'dino-4scale_inline_8xb2-12e_coco', 'swin', 'tsb', DET_W7, FPN_1),
    Leaves('dino', 'dino-4scale_inline_8xb2-24e_coco', 'swin', 'tsb', DET_W7, FPN_1),
    Leaves('dino', 'dino-4scale_inline_8xb2-12e_coco', 'cswin', 'tsb', DET, FPN_1),
    Leaves('dino', 'dino-4scale_inline_8xb2-24e_coco', 'cswin', 'tsb', DET, FPN_1),
    Leaves('mask2former', 'mask2former_inline_8xb2-lsj-50e_coco', 'swin', 'tsb', M2F_SWIN, M2F_MMDET),
    Leaves('mask2former', 'mask2former_inline_8xb2-lsj-50e_coco-panoptic', 'swin', 'tsb', M2F_SWIN, M2F_MMDET),
    Leaves('mask2former', 'mask2former_inline_8xb2-lsj-50e_coco-panoptic', 'cswin', 'tsb', AS_IS, M2F_MMDET),
    Leaves('mask2former', 'mask2former_inline_8xb2-160k_ade20k-512x512', 'swin', 'tsb', M2F_SWIN, M2F_MMSEG),
    Leaves('mask2former', 'mask2former_inline_8xb2-160k_ade20k-512x512', 'cswin', 'tsb', SEG, M2F_MMSEG),
    Leaves('mask2former', 'mask2former_inline_8xb2-90k_cityscapes-512x1024', 'swin', 'tsb', M2F_SWIN, M2F_MMSEG),
    Leaves('mask2former', 'mask2former_inline_8xb2-90k_cityscapes-512x1024', 'cswin', 't', SEG, M2F_MMSEG),
    Leaves('sem_fpn', 'fpn_inline-pvt_4xb4-80k_ade20k-512x512', 'pvt', 'tsml', AS_IS, FPN),
    Leaves('sem_fpn', 'fpn_inline-cswin_4xb4-80k_ade20k-512x512', 'cswin', 'tsb', SEG, FPN),
    Leaves('upernet', 'upernet_inline-swin_8xb2-160k_ade20k-512x512', 'swin', 'tsb', AS_IS, UPER),
    Leaves('upernet', 'upernet_inline-cswin_8xb2-160k_ade20k-512x512', 'cswin', 'tsb', SEG, UPER),
    Leaves('upernet', 'upernet_inline-deit_8xb2-160k_ade20k-512x512', 'deit', 'tsb', DET, UPER_MLN),
    Leaves('upernet', 'upernet_inline-swin_8xb2-80k_cityscapes-512x1024', 'swin', 'tsb', AS_IS, UPER),
    Leaves('upernet', 'upernet_inline-cswin_8xb2-80k_cityscapes-512x1024', 'cswin', 't', SEG, UPER),
    Leaves('vitdet', 'mask-rcnn_inline-deit_simple-fpn_lsj-100e_coco', 'deit', 'tsb', DET, SIMPLE_FPN),
    Leaves('vitdet', 'retinanet_inline-deit_simple-fpn_lsj-100e_coco', 'deit', 's', DET, SIMPLE_FPN),
)


def leaf_config(row: Leaves, size: str) -> str:
    """The text of one leaf config: the marker, its bases, the model's entries packed into lines of
    at most 120 characters (a new line only between entries)."""
    recipe, backbone = f"'../_base_/recipes/{row.recipe}.py'", f"'../_base_/backbones/inline-{row.family}-{size}.py'"
    bases = f'_base_ = [{recipe}, {backbone}]'
    if len(bases) > 120:
        bases = f'_base_ = [{recipe},\n          {backbone}]'
    lines = ['# Generated by tools/make_configs.py from its table of recipes x variants (LEAVES): edit the table.',
             bases]
    line = 'model = dict(' + row.backbone
    for part in row.parts:
        if len(line) + len(part) + 3 > 120:
            lines.append(line + ',')
            line = ' ' * len('model = dict(') + part
        else:
            line += ', ' + part
    return '\n'.join([*lines, line + ')']) + '\n'


def leaf_files() -> dict[Path, str]:
    """Every generated leaf config and its text."""
    return {CONFIGS / row.folder / name: leaf_config(row, size) for row in LEAVES for size, name in row.names()}


# ----------------------------------------------------------------------------- the metafile
def leaf_configs() -> list[Path]:
    """Every config a user runs: outside ``_base_`` folders (the generated ones even before they are written)."""
    return sorted({p for p in CONFIGS.rglob('*.py') if '_base_' not in p.relative_to(CONFIGS).parts}
                  | set(leaf_files()))


def first_base(path: Path) -> str | None:
    """The first entry of the config's ``_base_`` (its recipe), as the file writes it (or will write it)."""
    text = leaf_files().get(path) or path.read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == '_base_' for t in node.targets):
            value = ast.literal_eval(node.value)
            return value[0] if isinstance(value, list) else value
    return None


def recipe_of(path: Path) -> str:
    """The recipe the config follows: its first base, as a path from the repository root (or the
    installed package's config, ``mmdet::...``)."""
    base = first_base(path) or ''
    if '::' in base:
        return base
    return str((path.parent / base).resolve().relative_to(ROOT)) if base else ''


def data_of(path: Path) -> tuple[str, str]:
    """The training data a config names and its kind (:data:`DATA`): ``..._8xb2-90k_cityscapes-512x1024``
    -> ``('Cityscapes', 'semantic')``."""
    name = re.sub(r'-\d+x\d+$', '', path.stem.rsplit('_', 1)[-1])
    if name not in DATA:
        raise SystemExit(f'make_configs: {path.relative_to(ROOT)} ends in the data {name!r}, which DATA in '
                         f'tools/make_configs.py does not know: add it there (its name in the metafile, its kind)')
    return DATA[name]


def schedule_of(stem: str) -> str:
    """The schedule part of a config name, between the backbone (and neck) and the data:
    ``..._fpn_ms-crop-3x_coco`` -> ``ms-crop-3x``."""
    rest = BACKBONE.split(stem, maxsplit=1)[-1] if BACKBONE.search(stem) else stem
    return '_'.join(p for p in rest.split('_')[:-1] if p not in NECKS)


def model_entry(path: Path) -> dict[str, Any]:
    """The metafile entry of one config."""
    rel = path.relative_to(ROOT)
    folder, stem = path.parent.name, path.stem
    family, size = BACKBONE.search(stem + '_').groups()
    spec = registry.family(family)
    toy = folder == 'toy'
    data, kind = data_of(path)
    head = next(h for f, h in HEADS.items() if stem.startswith(_head_prefix(f))) if toy else HEADS[folder]
    if folder == 'vitdet' or (toy and 'simple-fpn' in stem):
        head = next(h for prefix, h in VITDET.items() if stem.startswith(prefix))
    if kind not in head[1]:
        raise SystemExit(f'make_configs: {rel} trains {head[0]} on {data} ({kind} data): HEADS in '
                         f'tools/make_configs.py names no task of that head on such data; add it there')
    metadata: dict[str, Any] = dict(Model=head[0], Task=head[1][kind])
    if toy:
        metadata.update(Backbone=f'InLine-{spec.title} (mini)', Pretrained='none (from scratch)',
                        **{'Training Data': data})
    else:
        weights = next(w for w in spec.weights if w.size == size)
        metadata.update(Backbone=variants.title(weights.name), Pretrained=f'inline://{weights.name}',
                        **{'ImageNet-1K top-1': weights.top1, 'Training Data': data})
    metadata.update(Schedule='toy: CPU minutes' if toy else schedule_of(stem), Recipe=recipe_of(path))
    return {'Name': stem, 'In Collection': 'InLine toys' if toy else 'InLine', 'Config': str(rel),
            'Metadata': metadata}


def _head_prefix(folder: str) -> str:
    return {'mask_rcnn': 'mask-rcnn_', 'cascade_rcnn': 'cascade-mask-rcnn_', 'retinanet': 'retinanet_',
            'dino': 'dino-4scale_', 'mask2former': 'mask2former_', 'sem_fpn': 'fpn_', 'upernet': 'upernet_',
            'vitdet': 'vitdet_'}[folder]


def metafile() -> str:
    """``configs/metafile.yml``: the collections and every config. No results: none of these models has
    been trained on COCO or ADE20K by this project (the toys' figures are in docs/toy_runs.md)."""
    data = {
        'Collections': [
            dict(Name='InLine', Metadata=dict(Architecture=['InLine attention']), Paper=PAPER,
                 README='docs/configs.md'),
            dict(Name='InLine toys', Metadata=dict(Architecture=['InLine attention']), Paper=PAPER,
                 README='docs/toy_runs.md'),
        ],
        'Models': [model_entry(p) for p in leaf_configs()],
    }
    header = ('# Generated by tools/make_configs.py from the configs and the family specs: do not edit.\n'
              '# No Results: none of these models has been trained on COCO or ADE20K by this project.\n')
    return header + yaml.safe_dump(data, sort_keys=False, width=120)


# ----------------------------------------------------------------------------- all of it
def generated() -> dict[Path, str]:
    """Every generated file and its text."""
    files = {BACKBONES / backbone_base_name(w): backbone_base(spec, w) for spec, w in registry.all_weights()}
    files.update(leaf_files())
    meta = metafile()
    files[METAFILE] = meta
    models = read_models(meta)
    readme, docs = ROOT / 'README.md', ROOT / 'docs' / 'configs.md'
    files[readme] = with_table(readme.read_text(), 'folders', folder_table(models))
    files[ROOT / 'docs' / 'backbones.md'] = with_table((ROOT / 'docs' / 'backbones.md').read_text(), 'presets',
                                                       preset_table())
    files[docs] = with_table(docs.read_text(), 'configs', config_table(models))
    for path, name, table in ((ROOT / 'docs' / 'checkpoints.md', 'weights', weights_table),
                              (ROOT / 'checkpoints' / 'README.md', 'weights', hand_placed_table),
                              (ROOT / 'tests' / 'data' / 'fixtures' / 'README.md', 'fixtures', fixtures_table)):
        files[path] = with_table(path.read_text(), name, table())
    return files


def stale() -> list[Path]:
    """The generated files whose committed text differs, and stray backbone bases no variant makes."""
    files = generated()
    changed = [p for p, text in files.items() if not p.is_file() or p.read_text() != text]
    return changed + sorted(p for p in BACKBONES.glob('*.py') if p not in files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--check', action='store_true', help='write nothing; exit 1 naming each file that differs')
    args = parser.parse_args(argv)
    files, differ = generated(), stale()
    for path in differ:
        rel = os.path.relpath(path, ROOT)
        if args.check:
            print(f'make_configs: {rel} differs from what the specs give (run python tools/make_configs.py)')
        elif path in files:
            path.write_text(files[path])
            print(f'make_configs: wrote {rel}')
        else:
            print(f'make_configs: {rel} is made by no variant of the registry; remove it if no config needs it')
    if args.check and differ:
        return 1
    if not differ:
        print('make_configs: every generated file is up to date')
    return 0


if __name__ == '__main__':
    sys.exit(main())
