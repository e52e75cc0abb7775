"""The authors' InLine-PVT checkpoint layout -> ours: a pure function of the state dict."""
import re

import torch

from ...typing import StateDict


def convert_authors_layout(state_dict: StateDict) -> tuple[StateDict, list[str]]:
    """Authors' InLine-PVT keys -> ours. Pure function of the state dict.

    ``patch_embed{s}`` / ``pos_embed{s}`` / ``block{s}.j`` -> ``stages.{s-1}.…``; in InLine
    blocks (those with ``attn.residual``) ``attn.q`` and ``attn.kv`` are fused into
    ``attn.qkv`` (q | k | v); drops ``head`` and a final ``norm`` if present.
    """
    inline_blocks = {k.split('.attn.')[0] for k in state_dict if '.attn.residual.' in k}
    out, dropped = {}, []
    for key, value in state_dict.items():
        if key.startswith(('head.', 'norm.', 'cls_token')):
            dropped.append(key)
            continue
        m = re.match(r'^(patch_embed|pos_embed|block)(\d)(.*)$', key)
        new = key
        if m:
            part = {'block': 'blocks', 'patch_embed': 'patch_embed', 'pos_embed': 'pos_embed'}[m.group(1)]
            new = f'stages.{int(m.group(2)) - 1}.{part}{m.group(3)}'
        prefix = key.split('.attn.')[0]
        if prefix in inline_blocks and re.search(r'\.attn\.(q|kv)\.(weight|bias)$', key):
            new_prefix = new.split('.attn.')[0]
            suffix = key.rsplit('.', 1)[1]
            if f'{new_prefix}.attn.qkv.{suffix}' not in out and f'{prefix}.attn.q.{suffix}' in state_dict:
                out[f'{new_prefix}.attn.qkv.{suffix}'] = torch.cat(
                    [state_dict[f'{prefix}.attn.q.{suffix}'], state_dict[f'{prefix}.attn.kv.{suffix}']], 0)
            continue
        out[new] = value
    return out, dropped
