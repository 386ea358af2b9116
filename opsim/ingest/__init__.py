"""Readers for real Ascend profiler files (torch_npu / msprof output).

`locate_profile` finds the files of a profile directory (`locate_profiles` every profile below a folder),
`read_kernels` reads kernel_details.csv or an msprof op_summary_*.csv into typed records, `read_trace_view`
reads trace_view.json with exact nanosecond times. The streaming readers (bounded memory) yield the same
records: `iter_op_summary` (CSV kernel tables), `iter_db_kernels` / `iter_db_api_events` (the SQLite export
ascend_pytorch_profiler_*.db), `iter_api_statistic` (api_statistic.csv); `iter_kernel_rows` and
`iter_host_calls` pick the reader by file.
Every reader turns a malformed file into a `ProfileFormatError` naming the file, row/position and column.
"""
from __future__ import annotations

_LAZY = {
    "ApiStatistic": "api_statistic", "iter_api_statistic": "api_statistic", "read_api_statistic": "api_statistic",
    "KernelRecord": "kernels", "KernelTable": "kernels", "canonical_core": "kernels", "canonical_dtype": "kernels",
    "read_kernels": "kernels", "ProfileFiles": "locate", "locate_profile": "locate", "locate_profiles": "locate",
    "iter_op_summary": "op_summary", "iter_db_api_events": "profiler_db", "iter_db_kernels": "profiler_db",
    "iter_host_calls": "sources", "iter_kernel_rows": "sources", "AclApiEvent": "trace_view",
    "FlowPair": "trace_view", "FlowPoint": "trace_view", "LaunchLink": "trace_view", "TraceEvent": "trace_view",
    "TraceView": "trace_view", "read_trace_view": "trace_view",
}
"""Exported name -> its module: loaded on first use, so a module that needs one small part of the package
(`opsim.ingest.transports`, for the cluster's links) does not load every reader."""


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opsim.ingest' has no attribute {name!r}")
    import importlib  # lazy: module __getattr__ (PEP 562): loaded when the name is first used
    value = getattr(importlib.import_module(f"opsim.ingest.{module}"), name)
    globals()[name] = value
    return value


__all__ = list(_LAZY)
