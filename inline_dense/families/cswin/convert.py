"""The authors' InLine-CSwin checkpoint layout -> ours: a pure function of the state dict."""
import re

from ...typing import StateDict


def convert_authors_layout(state_dict: StateDict) -> tuple[StateDict, list[str]]:
    """Authors' InLine-CSwin keys -> ours. Pure function of the state dict.

    ``stage1_conv_embed.{0,2}`` -> ``stem.{conv,norm}``; ``merge{i}`` -> ``stages.{i}.merge``;
    ``stage{s}.{j}.{qkv,proj}`` -> ``stages.{s-1}.blocks.{j}.attn.{qkv,proj}``; in InLine blocks
    (those with ``attns.0.residual``) ``attns.0.{get_v,residual}`` -> ``attn.{get_v,residual}``,
    in softmax blocks ``attns.{b}.get_v`` -> ``attn.get_v.{b}``; the final ``norm`` ->
    ``out_norms.{last}``; drops ``head``. Our own keys pass through unchanged.
    """
    inline_blocks = {k.split('.attns.')[0] for k in state_dict if re.search(r'\.attns\.0\.residual\.', k)}
    stage_ids = [int(m.group(1)) for k in state_dict for m in [re.match(r'^stage(\d)\.', k)] if m]
    last = max(stage_ids, default=4) - 1
    out, dropped = {}, []
    for key, value in state_dict.items():
        if key.startswith('head.'):
            dropped.append(key)
            continue
        new = re.sub(r'^stage1_conv_embed\.0\.', 'stem.conv.', key)
        new = re.sub(r'^stage1_conv_embed\.2\.', 'stem.norm.', new)
        new = re.sub(r'^merge(\d)\.', lambda m: f'stages.{m.group(1)}.merge.', new)
        new = re.sub(r'^norm\.', f'out_norms.{last}.', new)
        m = re.match(r'^stage(\d)\.(\d+)\.(.*)$', new)
        if m:
            block, rest = f'stages.{int(m.group(1)) - 1}.blocks.{m.group(2)}', m.group(3)
            if rest.startswith(('qkv.', 'proj.')):
                rest = f'attn.{rest}'
            elif rest.startswith('attns.'):
                branch, tail = rest[len('attns.'):].split('.', 1)
                inline = key.split('.attns.')[0] in inline_blocks
                rest = f'attn.{tail}' if inline else f"attn.get_v.{branch}.{tail[len('get_v.'):]}"
            new = f'{block}.{rest}'
        out[new] = value
    return out, dropped
