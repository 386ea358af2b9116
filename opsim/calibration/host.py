"""Per-API host timings from trace_view.json: phase 1 (GetWorkspaceSize) and phase 2 medians.

In torch_npu traces ``AscendCL@aclnnXxxGetWorkspaceSize`` appears only when the framework's executor cache
misses, while ``AscendCL@aclnnXxx`` appears for every call. A phase-2 event counts as a miss when a phase-1
event of the same API precedes it (in time, on any thread: torch_npu runs phase 1 on the Python thread and
phase 2 on its task-queue thread) and has not yet been paired; the other phase-2 events are hits.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from opsim.device.fitted import HostApiTiming, Measured, Provenance
from opsim.ingest.trace_view import TraceEvent, TraceView


def _measured(events: list[TraceEvent], file: str) -> Measured | None:
    if not events:
        return None
    med_ns = statistics.median(e.dur for e in events)
    # provenance rows of a trace are event indices (0-based, in file order among the X events), + 1
    return Measured(median_us=med_ns / 1000.0, n=len(events),
                    provenance=(Provenance(file=file, rows=tuple(sorted(e.index + 1 for e in events))),))


def host_table(trace: TraceView, file: str | Path | None = None) -> dict[str, HostApiTiming]:
    """API name -> measured phase-1 / phase-2 medians (hits and misses told apart)."""
    src = str(file if file is not None else trace.path)
    by_api: dict[str, list] = {}
    for a in trace.acl_api_events():
        if a.kind in ("phase1", "phase2"):
            by_api.setdefault(a.api, []).append(a)
    out: dict[str, HostApiTiming] = {}
    for api in sorted(by_api):
        evs = sorted(by_api[api], key=lambda a: (a.event.ts, a.kind))
        p1, p2, miss, hit = [], [], [], []
        pending = 0
        for a in evs:
            if a.kind == "phase1":
                p1.append(a.event)
                pending += 1
            else:
                p2.append(a.event)
                if pending:
                    miss.append(a.event)
                    pending -= 1
                else:
                    hit.append(a.event)
        out[api] = HostApiTiming(phase1=_measured(p1, src), phase2=_measured(p2, src),
                                 phase2_miss=_measured(miss, src), phase2_hit=_measured(hit, src))
    return out
