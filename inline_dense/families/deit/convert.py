"""The authors' InLine-DeiT checkpoint layout -> ours: a pure function of the state dict."""
import re

from ...typing import StateDict


def convert_authors_layout(state_dict: StateDict) -> tuple[StateDict, list[str]]:
    """Authors' InLine-DeiT keys -> ours. Pure function of the state dict.

    ``cls_token`` / ``pos_embed`` -> ``patch_embed.…`` (the stem holds them); ``blocks.i.…`` ->
    ``stages.i.blocks.0.…`` (a block per stage: ``out_indices`` and ``frozen_stages`` count blocks);
    the final ``norm`` -> the last block's output norm ``out_norms.{last}``; drops ``head``.
    """
    blocks = [int(m.group(1)) for k in state_dict for m in [re.match(r'^blocks\.(\d+)\.', k)] if m]
    last = max(blocks, default=-1)
    out, dropped = {}, []
    for key, value in state_dict.items():
        if key.startswith('head.'):
            dropped.append(key)
            continue
        new = key
        if key in ('cls_token', 'pos_embed'):
            new = f'patch_embed.{key}'
        elif key.startswith('norm.') and last >= 0:
            new = f'out_norms.{last}.{key[len("norm."):]}'
        else:
            new = re.sub(r'^blocks\.(\d+)\.', r'stages.\1.blocks.0.', key)
        out[new] = value
    return out, dropped
