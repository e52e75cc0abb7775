"""Builds our backbones with the settings of the authors' reference fixtures."""
import os
from typing import Tuple

import torch

from inline_dense.openmmlab import InLineCSwin, InLinePVT, InLineSwin

FIXTURES = os.path.join(os.path.dirname(__file__), 'data', 'fixtures')
VARIANTS = ('inline_swin_mini', 'inline_pvt_mini', 'inline_cswin_mini')


def load_reference(variant: str) -> dict:
    return torch.load(os.path.join(FIXTURES, f'{variant}_reference.pt'), weights_only=True)


def authors_checkpoint(variant: str) -> str:
    return os.path.join(FIXTURES, f'{variant}_authors_layout.pth')


def build_reference_backbone(variant: str, checkpoint: str, **overrides) -> Tuple[torch.nn.Module, dict]:
    """Our backbone with the authors' arch of ``variant``, loaded from ``checkpoint`` through init_cfg."""
    ref = load_reference(variant)
    a = ref['arch']
    common = dict(out_norm=False, drop_path_rate=0.0,
                  init_cfg=dict(type='Pretrained', checkpoint=checkpoint), **overrides)
    if ref['kind'] == 'swin':
        model = InLineSwin(embed_dims=a['embed_dim'], depths=a['depths'], num_heads=a['num_heads'],
                           attn_type=a['attn_type'], **common)
    elif ref['kind'] == 'cswin':
        model = InLineCSwin(embed_dims=a['embed_dim'], depths=a['depth'], num_heads=a['num_heads'],
                            split_size=a['split_size'], attn_type=a['attn_type'], mlp_ratio=a['mlp_ratio'], **common)
    else:
        model = InLinePVT(embed_dims=a['embed_dims'], depths=a['depths'], num_heads=a['num_heads'],
                          mlp_ratios=a['mlp_ratios'], attn_type=a['attn_type'], sr_ratios=a['sr_ratios'],
                          qkv_bias=a['qkv_bias'], **common)
    model.init_weights()
    return model.eval(), ref
