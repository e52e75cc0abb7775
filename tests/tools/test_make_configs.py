"""tools/make_configs.py: the backbone config bases, configs/metafile.yml and the generated tables
of README.md and docs/configs.md are what the family specs and the configs give (CI fails while a
committed file differs), and a change of a spec shows in them."""
import dataclasses
import re

import pytest
import yaml

from helpers import ROOT, import_tool, load_config
from inline_dense import registry


def test_every_generated_file_is_committed_as_generated():
    tool = import_tool('make_configs')
    assert tool.stale() == [], 'run python tools/make_configs.py and commit what it writes'
    assert tool.main(['--check']) == 0


def test_a_changed_spec_changes_its_backbone_bases(monkeypatch):
    tool = import_tool('make_configs')
    spec = next(iter(registry.FAMILIES.values()))
    configs = dataclasses.replace(spec.configs, drop_path=dict.fromkeys(spec.configs.drop_path, 0.5))
    monkeypatch.setitem(registry.FAMILIES, spec.name, dataclasses.replace(spec, configs=configs))
    stale = tool.stale()
    assert sorted(p.name for p in stale) == sorted(tool.backbone_base_name(w) for w in spec.weights)
    assert tool.main(['--check']) == 1


def test_the_backbone_bases_carry_the_spec():
    for spec, weights in registry.all_weights():
        cfg = load_config(ROOT / 'configs' / '_base_' / 'backbones' / f'{weights.name.replace("_", "-")}.py')
        assert cfg.inline_backbone == dict(type=spec.class_name, arch=weights.preset,
                                           init_cfg=dict(type='Pretrained', checkpoint=f'inline://{weights.name}'))
        assert cfg.inline_channels == [o.channels for o in spec.preset_outputs(weights.preset)]
        assert cfg.inline_drop_path_rate == spec.configs.drop_path[weights.preset]


def test_the_metafile_lists_every_config_once():
    tool = import_tool('make_configs')
    models = yaml.safe_load((ROOT / 'configs' / 'metafile.yml').read_text())['Models']
    listed = [m['Config'] for m in models]
    assert listed == [str(p.relative_to(ROOT)) for p in tool.leaf_configs()]
    for m in models:
        assert (ROOT / m['Config']).is_file(), m['Name']
        assert m['Metadata']['Recipe'], m['Name']
        if m['In Collection'] == 'InLine':
            assert m['Metadata']['Pretrained'].startswith('inline://inline_'), m['Name']


def test_the_task_and_data_come_from_the_name_and_the_head():
    tool = import_tool('make_configs')
    entries = {m['Name']: m['Metadata'] for m in map(tool.model_entry, tool.leaf_configs())}
    seen = {(m['Task'], m['Training Data']) for m in entries.values()}
    assert ('Panoptic Segmentation', 'toy COCO panoptic') in seen
    assert ('Semantic Segmentation', 'toy Cityscapes') in seen
    for name, meta in entries.items():
        data = name.rsplit('_', 1)[-1]
        assert meta['Task'], name
        assert meta['Training Data'] == tool.DATA[data.split('-512x')[0]][0], name
        if data.endswith('coco') or data.endswith('coco-panoptic'):  # 'cascade' holds 'ade': still COCO
            assert 'COCO' in meta['Training Data'], name
            assert (meta['Task'] == 'Panoptic Segmentation') == data.endswith('panoptic'), name
        else:
            assert meta['Task'] == 'Semantic Segmentation', name


def test_a_name_the_generator_cannot_place_is_refused_in_one_line(monkeypatch):
    tool = import_tool('make_configs')
    monkeypatch.setattr(tool, 'first_base', lambda _path: None)
    for name, words in (('upernet_inline-swin-t_8xb2-80k_mapillary-512x1024.py', "the data 'mapillary'"),
                        ('upernet_inline-swin-t_8xb2-80k_coco.py', 'UperNet on COCO (objects data)')):
        with pytest.raises(SystemExit, match=re.escape(words)) as err:
            tool.model_entry(tool.CONFIGS / 'upernet' / name)
        assert '\n' not in str(err.value)
