#!/usr/bin/env python
"""Convert an authors' InLine ImageNet checkpoint into a backbone checkpoint, once.

    python tools/convert_checkpoint.py inline_swin_t.pth checkpoints/inline_swin_t_backbone.pth
    python tools/convert_checkpoint.py inline://inline_swin_t checkpoints/inline_swin_t_backbone.pth
    python tools/convert_checkpoint.py work_dirs/run/iter_400.pth backbone.safetensors

The source may also be one of this project's training checkpoints (its ``backbone.`` weights
are taken). The result loads through ``init_cfg=dict(type='Pretrained', checkpoint=...)`` exactly
like the original file (which loads directly too; converting only saves the work
at every start and drops the classification head from the file).
"""
import argparse
import sys

from inline_dense import registry
from inline_dense.checkpoint import CheckpointError, DownloadError
from inline_dense.models.convert import convert_file

try:  # this project's training checkpoints (mmengine Runner files) hold mmengine's HistoryBuffer, pickled with
    # getattr: the OpenMMLab adapter adds both to the reader's allow-list, as the other tools have it
    from inline_dense.openmmlab.mmengine_types import allow_mmengine_checkpoint_types
    allow_mmengine_checkpoint_types()
except ImportError:  # no mmengine: such a file was written elsewhere; authors' files need nothing of it
    pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('src', help="authors' checkpoint ({'model': state_dict, ...}): a path, "
                                    "inline://<variant> or an http(s) URL")
    parser.add_argument('dst', help='where to write the backbone checkpoint: a .safetensors name writes that '
                                    'format (needs the safetensors package), any other a torch.save file')
    parser.add_argument('--backbone', default='auto',
                        choices=['auto', *(spec.class_name for spec in registry.FAMILIES.values())])
    parser.add_argument('--weights', default='auto', choices=['auto', 'model', 'ema'],
                        help="which weights to keep: 'auto' = the EMA weights if the file has them "
                             "(state_dict_ema / model_ema), else the model's")
    parser.add_argument('--trusted', action='store_true',
                        help='unpickle the source fully (runs code the file names), for a file from a '
                             'source you trust that is refused otherwise; not needed for training '
                             'configs or optimizer state, which load as plain data')
    args = parser.parse_args(argv)
    name, kept, dropped = convert_file(args.src, args.dst, args.backbone, args.trusted, args.weights)
    print(f'{name}: wrote {kept} tensors to {args.dst} (dropped {dropped}: classification head, '
          f'derived buffers)')


if __name__ == '__main__':
    try:
        main()
    except (CheckpointError, DownloadError, FileNotFoundError) as exc:  # one line, no traceback
        sys.exit(f'error: {exc}')
