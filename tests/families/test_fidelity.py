"""Our backbones reproduce the authors' models: every stage output of every fixture case."""
import pytest
import torch
from reference_models import VARIANTS, authors_checkpoint, build_reference_backbone, load_reference

from helpers import import_tool
from inline_dense.checkpoint import load_pretrained

TOL = 1e-4


def max_errors(model, ref):
    errors = []
    with torch.no_grad():
        for case in ref['cases']:
            outs = model(case['input'])
            assert len(outs) == len(case['stages'])
            for out, expected in zip(outs, case['stages']):
                assert out.shape == expected.shape
                errors.append((out - expected).abs().max().item())
    return errors


@pytest.mark.parametrize('variant', VARIANTS)
def test_authors_checkpoint_reproduces_every_stage(variant):
    model, ref = build_reference_backbone(variant, authors_checkpoint(variant))
    errors = max_errors(model, ref)
    print(variant, [f'{e:.2e}' for e in errors])
    assert max(errors) < TOL, errors


@pytest.mark.parametrize('variant', VARIANTS)
def test_random_weights_do_not_match(variant):
    """The fidelity check can fail: the same arch without the checkpoint is far off."""
    model, ref = build_reference_backbone(variant, authors_checkpoint(variant))
    model.init_from_scratch()
    assert max(max_errors(model, ref)) > 1e-2


@pytest.mark.parametrize('variant', VARIANTS)
@pytest.mark.parametrize('layout', ['mmengine_backbone_prefix', 'mmengine_plain', 'bare', 'converted_tool'])
def test_other_checkpoint_layouts_load_identically(variant, layout, tmp_path, capsys):
    reference_model, ref = build_reference_backbone(variant, authors_checkpoint(variant))
    ours = reference_model.state_dict()
    path = tmp_path / 'ckpt.pth'
    if layout == 'mmengine_backbone_prefix':  # a whole detector's checkpoint
        state = {f'backbone.{k}': v for k, v in ours.items()}
        state['neck.lateral.weight'] = torch.zeros(1)
        torch.save({'meta': {'epoch': 1}, 'state_dict': state}, path)
    elif layout == 'mmengine_plain':
        torch.save({'state_dict': ours}, path)
    elif layout == 'bare':
        torch.save(ours, path)
    else:  # the tool's main in this process (run as a script: test_checkpoint_safe_load)
        import_tool('convert_checkpoint').main([authors_checkpoint(variant), str(path)])
        assert 'wrote' in capsys.readouterr().out
    model, _ = build_reference_backbone(variant, str(path))
    assert max(max_errors(model, ref)) < TOL


def test_final_swin_norm_becomes_last_output_norm():
    """The authors' final LayerNorm is the last stage's output norm of the dense backbone."""
    variant = 'inline_swin_mini'
    ckpt = torch.load(authors_checkpoint(variant), weights_only=True)['model']
    _model, _ = build_reference_backbone(variant, authors_checkpoint(variant))
    a = load_reference(variant)['arch']
    from inline_dense.models import InLineSwin
    dense = InLineSwin(embed_dims=a['embed_dim'], depths=a['depths'], num_heads=a['num_heads'],
                       attn_type=a['attn_type'], out_indices=(3,))
    load_pretrained(dense, authors_checkpoint(variant))
    torch.testing.assert_close(dense.out_norms['3'].weight, ckpt['norm.weight'])
