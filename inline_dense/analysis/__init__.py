"""Measuring tools: FLOP/parameter counting (``flops``) and latency/memory benchmarks (``benchmark``)."""
from .flops import FlopReport, count_flops, count_params, inline_attention_macs

__all__ = ['FlopReport', 'count_flops', 'count_params', 'inline_attention_macs']
