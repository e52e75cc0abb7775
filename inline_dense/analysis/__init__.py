"""Measuring tools: FLOP/parameter counting (``flops``) and latency/memory benchmarks, by
concern: ``zoo`` (models by name, whole models from configs), ``timing`` (the timing loop),
``memory`` (peak memory), ``rows`` (result rows, pooling), ``jobs`` (one job, sweeps in
subprocesses), ``worker`` (the subprocess end), ``ablation`` (one InLine layer); ``report`` and
``plot`` print and draw the results. ``tools/benchmark.py`` is the command line over them."""
from .flops import FlopReport, count_flops, count_params, inline_attention_macs

__all__ = ['FlopReport', 'count_flops', 'count_params', 'inline_attention_macs']
