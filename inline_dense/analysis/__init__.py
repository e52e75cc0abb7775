"""Measuring tools: FLOP/parameter counting (``flops``) and latency/memory benchmarks
(``benchmark`` gathers the public names of ``zoo``, ``timing``, ``memory``, ``rows``,
``jobs``, ``ablation``; ``report`` and ``plot`` print and draw the results)."""
from .flops import FlopReport, count_flops, count_params, inline_attention_macs

__all__ = ['FlopReport', 'count_flops', 'count_params', 'inline_attention_macs']
