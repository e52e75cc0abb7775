"""Step 7: the toy Mask R-CNN demo (``tools/demo_toy.py``: toy COCO data, train from scratch,
COCO box and mask AP with pycocotools, a picture of predictions) on the check's device."""
import importlib.util
import os
import shutil
import tempfile
import time
from types import ModuleType

import torch

from inline_dense.openmmlab.engine.launch import REPO_ROOT

from .measure import Emit, recorded
from .plan import CheckPlan

METRICS = {'coco/bbox_mAP': 'box_ap', 'coco/bbox_mAP_50': 'box_ap50', 'coco/segm_mAP': 'mask_ap',
           'coco/segm_mAP_50': 'mask_ap50'}


def demo_tool(repo_root: str) -> ModuleType:
    """tools/demo_toy.py as a module."""
    spec = importlib.util.spec_from_file_location('inline_dense_tools_demo_toy',
                                                  os.path.join(repo_root, 'tools', 'demo_toy.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(plan: CheckPlan, emit: Emit) -> None:
    device = torch.device(plan.device)
    with recorded(emit, device, name='toy mask-rcnn demo') as row:
        work = tempfile.mkdtemp(prefix='inline_dense_gpu_check_toy_')
        os.chdir(work)  # the demo makes data/toy_coco under the working directory
        args = ['--work-dir', os.path.join(work, 'work_dir'), *plan.toy_args]
        if plan.toy_data:
            if '--cfg-options' not in args:
                args.append('--cfg-options')
            args += [f'train_dataloader.dataset.toy_data.{k}={v}' for k, v in plan.toy_data.items()]
        t0 = time.time()
        metrics = demo_tool(REPO_ROOT).main(args)
        row['seconds'] = round(time.time() - t0, 1)
        row.update({short: round(float(metrics[key]), 4) for key, short in METRICS.items() if key in metrics})
        row['ok'] = all(key in metrics for key in ('coco/bbox_mAP', 'coco/segm_mAP'))
        picture = os.path.join(work, 'work_dir', 'predictions.png')
        if plan.out_dir and os.path.isfile(picture):
            shutil.copyfile(picture, os.path.join(plan.out_dir, 'toy_predictions.png'))
