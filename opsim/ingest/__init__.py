"""Readers for real Ascend profiler files (torch_npu / msprof output).

`locate_profile` finds the files of a profile directory, `read_kernels` reads kernel_details.csv or an msprof
op_summary_*.csv into typed records, `read_trace_view` reads trace_view.json with exact nanosecond times.
Every reader turns a malformed file into a `ProfileFormatError` naming the file, row/position and column.
"""
from __future__ import annotations

from opsim.ingest.kernels import KernelRecord, KernelTable, canonical_core, canonical_dtype, read_kernels
from opsim.ingest.locate import ProfileFiles, locate_profile
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
    "AclApiEvent", "FlowPair", "FlowPoint", "KernelRecord", "KernelTable", "LaunchLink", "ProfileFiles",
    "TraceEvent", "TraceView", "canonical_core", "canonical_dtype", "locate_profile", "read_kernels",
    "read_trace_view",
]
