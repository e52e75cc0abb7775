"""The demo's picture shows what the AP says whatever the head's score scale:
by default each image's top N predictions, N = its number of ground-truth objects. At the old fixed
0.5 the DINO toy (box AP 0.45, scores mostly below 0.5) drew one box in four images."""
import torch
from mmdet.structures import DetDataSample
from mmengine.structures import InstanceData

from helpers import import_tool


def sample(scores, gt_count):
    s = DetDataSample()
    s.gt_instances = InstanceData(bboxes=torch.zeros(gt_count, 4), labels=torch.zeros(gt_count, dtype=torch.long))
    s.pred_instances = InstanceData(bboxes=torch.arange(len(scores) * 4.).reshape(-1, 4),
                                    scores=torch.tensor(scores), labels=torch.zeros(len(scores), dtype=torch.long))
    return s


def test_default_draws_the_top_n_by_score():
    demo = import_tool('demo_toy')
    assert demo.parse_args([]).score_thr is None  # the default is the top N, not a fixed threshold
    shown = demo.picture_predictions(sample([0.4, 0.3, 0.2, 0.1, 0.45], 3), None)
    assert shown.pred_instances.scores.tolist() == torch.tensor([0.45, 0.4, 0.3]).tolist()
    assert len(demo.picture_predictions(sample([0.4, 0.3], 3), None).pred_instances) == 2  # fewer than N
    assert len(demo.picture_predictions(sample([0.4], 0), None).pred_instances) == 0


def test_a_given_threshold_still_applies():
    demo = import_tool('demo_toy')
    shown = demo.picture_predictions(sample([0.9, 0.3, 0.6], 1), 0.5)
    assert sorted(shown.pred_instances.scores.tolist()) == torch.tensor([0.6, 0.9]).tolist()
