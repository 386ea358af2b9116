"""One entry point per kind of record, whatever file of a profile holds it.

``iter_kernel_rows`` streams the device kernels of a kernel_details.csv, an op_summary_*.csv or an
ascend_pytorch_profiler_*.db; ``iter_host_calls`` the AscendCL host calls of a trace_view.json or of a db's
CANN_API. Both yield the records the format-specific readers yield (``KernelRecord``, ``AclApiEvent``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from opsim.ingest.kernels import KernelRecord
from opsim.ingest.trace_view import AclApiEvent, TraceView, read_trace_view
from opsim.ingest.op_summary import iter_op_summary
from opsim.ingest.profiler_db import iter_db_api_events, iter_db_kernels


def is_db(path: str | Path) -> bool:
    """Whether `path` names an SQLite export (by its suffix; the reader checks the content)."""
    return Path(path).suffix.lower() in (".db", ".sqlite", ".sqlite3")


def iter_kernel_rows(path: str | Path, skipped: dict[str, int] | None = None) -> Iterator[KernelRecord]:
    """The kernel rows of one kernel source (CSV table or db export), streamed; skips counted in `skipped`."""
    if is_db(path):
        return iter_db_kernels(path, skipped)
    return iter_op_summary(path, skipped)


def iter_host_calls(path: str | Path) -> Iterator[AclApiEvent]:
    """The AscendCL host calls of a trace_view.json (parsed whole) or a db export (streamed)."""
    if is_db(path):
        return iter_db_api_events(path)
    return iter(read_trace_view(path).acl_api_events())


def read_view(path: str | Path, progress=None) -> "TraceView":
    """The TraceView of a trace_view.json, or of a db export's tables (opsim.ingest.db_view)."""
    if is_db(path):
        from opsim.ingest.db_view import read_db_view  # lazy: only a db export needs it
        return read_db_view(path, progress)
    return read_trace_view(path, progress)


__all__ = ["is_db", "iter_host_calls", "iter_kernel_rows", "read_view"]
