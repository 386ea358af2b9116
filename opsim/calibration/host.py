"""Per-API host timings from trace_view.json: phase 1 (GetWorkspaceSize) and phase 2 medians.

In torch_npu traces ``AscendCL@aclnnXxxGetWorkspaceSize`` appears only when the framework's executor cache
misses, while ``AscendCL@aclnnXxx`` appears for every call. A phase-2 event counts as a miss when a phase-1
event of the same API precedes it (in time, on any thread: torch_npu runs phase 1 on the Python thread and
phase 2 on its task-queue thread) and has not yet been paired; the other phase-2 events are hits.
"""
from __future__ import annotations

import bisect
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from opsim.device.fitted import HostApiTiming, Measured, Provenance
from opsim.ingest.api_statistic import ApiStatistic
from opsim.ingest.trace_view import AclApiEvent, TraceEvent, TraceView


def _measured(events: list[tuple[str, TraceEvent]]) -> Measured | None:
    """The median of (file, event) pairs, with provenance per file."""
    if not events:
        return None
    med_ns = statistics.median(e.dur for _f, e in events)
    rows: dict[str, list[int]] = {}
    for f, e in events:  # provenance rows of a trace are event indices (0-based, in file order), + 1
        rows.setdefault(f, []).append(e.index + 1)
    return Measured(median_us=med_ns / 1000.0, n=len(events),
                    provenance=tuple(Provenance(file=f, rows=tuple(sorted(r))) for f, r in rows.items()))


@dataclass
class HostCalls:
    """AscendCL host calls read from a file other than a trace (a db export's CANN_API): what ``host_table``
    reads of a TraceView."""

    path: Path
    events: list[AclApiEvent]

    def acl_api_events(self) -> list[AclApiEvent]:
        return self.events


def host_table_from_statistics(rows: Iterable[ApiStatistic]) -> dict[str, HostApiTiming]:
    """API name -> phase-1 / phase-2 timings from api_statistic.csv rows: the table gives each API's mean
    over its calls (hits and misses together), kept as ``median_us`` with the call count as ``n``."""
    out: dict[str, dict[str, Measured]] = {}
    for r in rows:
        if r.is_aclnn and r.count > 0:
            m = Measured(median_us=r.avg_us, n=r.count, provenance=(Provenance(file=r.source, rows=(r.row,)),))
            out.setdefault(r.api, {})[r.kind] = m
    return {api: HostApiTiming(phase1=k.get("phase1"), phase2=k.get("phase2")) for api, k in sorted(out.items())}


def host_table(trace: "TraceView | HostCalls", file: str | Path | None = None) -> dict[str, HostApiTiming]:
    """API name -> measured phase-1 / phase-2 medians (hits and misses told apart)."""
    return host_table_of([trace], [file])


def host_table_of(traces: "list[TraceView | HostCalls]",
                  files: "list[str | Path | None] | None" = None) -> dict[str, HostApiTiming]:
    """One host table over several profiles: each profile's calls are told apart (miss or hit) within that
    profile (two ranks of one run overlap in time), then the medians pool every profile's calls."""
    by_api: dict[str, dict[str, list[tuple[str, TraceEvent]]]] = {}
    for trace, file in zip(traces, files or [None] * len(traces)):
        src = str(file if file is not None else trace.path)
        for a, kind in classify_calls(trace.acl_api_events()):
            kinds = by_api.setdefault(a.api, {"phase1": [], "phase2": [], "phase2_miss": [], "phase2_hit": []})
            kinds[kind].append((src, a.event))
            if kind != "phase1":
                kinds["phase2"].append((src, a.event))
    return {api: HostApiTiming(**{k: _measured(v) for k, v in kinds.items()}) for api, kinds in
            sorted(by_api.items())}


def classify_calls(events: Iterable[AclApiEvent]) -> list[tuple[AclApiEvent, str]]:
    """The ACLNN calls among `events` in time order per API, each with its kind: ``phase1``
    (GetWorkspaceSize), ``phase2_miss`` (a phase 2 after a not yet paired phase 1 of its API) or
    ``phase2_hit``."""
    by_api: dict[str, list[AclApiEvent]] = {}
    for a in events:
        if a.kind in ("phase1", "phase2"):
            by_api.setdefault(a.api, []).append(a)
    out: list[tuple[AclApiEvent, str]] = []
    for api in sorted(by_api):
        pending = 0
        for a in sorted(by_api[api], key=lambda a: (a.event.ts, a.kind)):
            if a.kind == "phase1":
                out.append((a, "phase1"))
                pending += 1
            elif pending:
                out.append((a, "phase2_miss"))
                pending -= 1
            else:
                out.append((a, "phase2_hit"))
    return out


#: torch_npu task-queue host phases measured from Enqueue / Dequeue@ events (opsim.runtime.torch_npu charges them).
QUEUE_PHASES = ("enqueue", "dequeue", "dequeue gap")


def _corr(e: TraceEvent) -> int | str | None:
    """An event's correlation id when it is one (a damaged file may hold any JSON value in `args`)."""
    corr = e.args.get("correlation_id") if isinstance(e.args, dict) else None
    return corr if isinstance(corr, (int, str)) and not isinstance(corr, bool) else None


def _dequeue_overheads(deq: list[TraceEvent], acl_by_tid: dict) -> list[tuple[int, TraceEvent]]:
    """(dequeue duration minus its top-level AscendCL events on the same thread, dequeue) for every dequeue.

    Each thread's AscendCL events are sorted once (by start, the longer first on a tie) and each dequeue
    reads only the events that start inside it (found by bisection): linear in the events, not
    dequeues x events."""
    starts: dict = {}
    for tid, evs in acl_by_tid.items():
        evs.sort(key=lambda e: (e.ts, -e.dur))
        starts[tid] = [e.ts for e in evs]
    out: list[tuple[int, TraceEvent]] = []
    for d in deq:
        evs = acl_by_tid.get(d.tid, ())
        i = bisect.bisect_left(starts[d.tid], d.ts) if evs else 0
        d_end = d.end
        covered = d.ts  # end of the last top-level event: an event ending by then is nested inside it
        inner = 0
        while i < len(evs) and evs[i].ts <= d_end:
            e = evs[i]
            e_end = e.ts + e.dur
            if e_end <= d_end and not (e.ts < covered and e_end <= covered):
                inner += e.dur
                covered = e_end
            i += 1
        out.append((d.dur - inner, d))
    return out


def queue_phases(trace: TraceView, file: str | Path | None = None) -> dict[str, Measured]:
    """Medians of torch_npu's task-queue costs: ``enqueue`` (an ``Enqueue`` event on the issuing thread),
    ``dequeue`` (a ``Dequeue@X`` event minus the top-level AscendCL events inside it on the consumer thread)
    and ``dequeue gap`` (from one Dequeue's end to the next one's start when that job was already enqueued,
    so the consumer was busy, not waiting). Phases with no event are left out."""
    src = str(file if file is not None else trace.path)
    enq = [e for e in trace.events if e.name == "Enqueue"]
    deq = sorted((e for e in trace.events if e.name.startswith("Dequeue")), key=lambda e: (type(e.tid) is str, e.tid, e.ts))  # str tids apart
    acl_by_tid: dict = {}
    for e in trace.events:
        if e.name.startswith("AscendCL@"):
            acl_by_tid.setdefault(e.tid, []).append(e)
    overhead = _dequeue_overheads(deq, acl_by_tid)
    enq_end = {_corr(e): e.end for e in enq if _corr(e) is not None}
    gaps: list[tuple[int, TraceEvent]] = []
    for a, b in zip(deq, deq[1:]):
        ready = enq_end.get(_corr(b))
        if a.tid == b.tid and ready is not None and ready <= a.end and b.ts >= a.end:
            gaps.append((b.ts - a.end, b))
    out: dict[str, Measured] = {}
    for phase, pairs in (("enqueue", [(e.dur, e) for e in enq]), ("dequeue", overhead), ("dequeue gap", gaps)):
        if pairs:
            out[phase] = Measured(median_us=statistics.median(v for v, _ in pairs) / 1000.0, n=len(pairs),
                                  provenance=(Provenance(file=src, rows=tuple(sorted(e.index + 1
                                                                                    for _, e in pairs))),))
    return out
