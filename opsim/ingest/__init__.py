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

from opsim.ingest.api_statistic import ApiStatistic, iter_api_statistic, read_api_statistic
from opsim.ingest.kernels import KernelRecord, KernelTable, canonical_core, canonical_dtype, read_kernels
from opsim.ingest.locate import ProfileFiles, locate_profile, locate_profiles
from opsim.ingest.op_summary import iter_op_summary
from opsim.ingest.profiler_db import iter_db_api_events, iter_db_kernels
from opsim.ingest.sources import iter_host_calls, iter_kernel_rows
from opsim.ingest.trace_view import (
    AclApiEvent,
    FlowPair,
    FlowPoint,
    LaunchLink,
    TraceEvent,
    TraceView,
    read_trace_view,
)

__all__ = [
    "ApiStatistic", "iter_api_statistic", "iter_db_api_events", "iter_db_kernels", "iter_host_calls",
    "iter_kernel_rows", "iter_op_summary", "locate_profiles", "read_api_statistic",
    "AclApiEvent", "FlowPair", "FlowPoint", "KernelRecord", "KernelTable", "LaunchLink", "ProfileFiles",
    "TraceEvent", "TraceView", "canonical_core", "canonical_dtype", "locate_profile", "read_kernels",
    "read_trace_view",
]
