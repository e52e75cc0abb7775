"""Latency / throughput / peak-memory measurement: the public names in one import.

The code lives by concern: :mod:`.zoo` (models by name, whole models from configs),
:mod:`.timing` (the timing loop and the step), :mod:`.memory` (peak memory),
:mod:`.rows` (result rows and pooling), :mod:`.jobs` (one job, sweeps in subprocesses),
:mod:`.worker` (the subprocess end), :mod:`.ablation` (one InLine layer),
:mod:`.report` / :mod:`.plot` (tables, machine info, the figure). ``tools/benchmark.py``
is the command line over them.
"""
from .ablation import layer_rows, layer_variants, measure_layer
from .jobs import DEFAULT_RESOLUTIONS, Job, measure, measure_job, parse_hw, plan_jobs, run_in_subprocess, run_sweep
from .memory import PeakCuda, PeakRSS, current_rss, peak_tracker
from .rows import Measurement, pool
from .timing import make_step, output_sum, tensors_in, time_calls
from .zoo import DEFAULT_MODELS, ConfigModel, backbone_zoo, build_backbone, build_model, init_model

__all__ = ['layer_rows', 'layer_variants', 'measure_layer', 'DEFAULT_RESOLUTIONS', 'Job', 'measure',
           'measure_job', 'parse_hw', 'plan_jobs', 'run_in_subprocess', 'run_sweep', 'PeakCuda', 'PeakRSS',
           'current_rss', 'peak_tracker', 'Measurement', 'pool', 'make_step', 'output_sum', 'tensors_in',
           'time_calls', 'DEFAULT_MODELS', 'ConfigModel', 'backbone_zoo', 'build_backbone', 'build_model',
           'init_model']
