"""The authors' InLine-Swin checkpoint layout -> ours: a pure function of the state dict."""
import re

from ...typing import StateDict


def convert_authors_layout(state_dict: StateDict) -> tuple[StateDict, list[str]]:
    """Authors' InLine-Swin keys -> ours. Pure function of the state dict.

    ``layers.i`` -> ``stages.i``; softmax blocks (those with a relative position bias
    table) ``attn.*`` -> ``attn.w_msa.*``; final ``norm`` -> ``out_norms.3`` (it is the
    last stage's output norm); drops ``head``, ``relative_position_index``, ``attn_mask``.
    """
    softmax_blocks = {k.split('.attn.')[0] for k in state_dict
                      if k.endswith('attn.relative_position_bias_table')}
    stage_ids = [int(k.split('.')[1]) for k in state_dict if re.match(r'^(layers|stages)\.\d+\.', k)]
    last = max(stage_ids, default=3)
    out, dropped = {}, []
    for key, value in state_dict.items():
        if key.startswith('head.') or key.endswith(('relative_position_index', 'attn_mask')):
            dropped.append(key)
            continue
        new = key
        prefix = key.split('.attn.')[0]
        if prefix in softmax_blocks and '.attn.w_msa.' not in key:
            new = key.replace('.attn.', '.attn.w_msa.', 1)
        new = re.sub(r'^layers\.', 'stages.', new)
        new = re.sub(r'^norm\.', f'out_norms.{last}.', new)
        out[new] = value
    return out, dropped
