"""One step of the GPU check in its own process: ``python -m inline_dense_dev.gpu_check.worker
STEP PLAN_JSON``. Each result row is printed as one ``GPUCHECK_ROW {json}`` line as soon as it is
measured; everything else the step prints is left to the log. A crash (or a CUDA error that
poisons the context) ends this step only."""
import importlib
import json
import sys
from typing import Any

PREFIX = 'GPUCHECK_ROW '
MODULES = {'ops': 'ops_step', 'deform_attn': 'deform_attn_step', 'attention': 'attention_step',
           'backbones': 'backbone_step', 'detector': 'detector_step', 'query_heads': 'query_heads_step',
           'toy': 'toy_step'}


def emit(row: dict[str, Any]) -> None:
    print(PREFIX + json.dumps(row, default=str), flush=True)


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] not in MODULES:
        sys.exit(f'usage: python -m inline_dense_dev.gpu_check.worker {{{",".join(MODULES)}}} PLAN_JSON')
    import inline_dense.openmmlab  # noqa: F401  (serves mmcv._ext before mmcv.ops is imported; registers the backbones)

    from .plan import CheckPlan
    plan = CheckPlan.from_json(json.loads(argv[1]))
    if plan.threads:
        import torch
        torch.set_num_threads(plan.threads)
    importlib.import_module(f'{__package__}.{MODULES[argv[0]]}').run(plan, emit)


if __name__ == '__main__':
    main(sys.argv[1:])
