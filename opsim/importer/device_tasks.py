"""Device tasks that are no ACLNN call's kernels: communication, event record/wait, memcpy, markers.

A real profile's device rows hold more than the calls' kernels: HCCL collectives (`hcom_allReduce_`) and their
notify/wait/copy sub-tasks on their own streams, `EVENT_RECORD` / `EVENT_WAIT` tasks that make one stream wait
for another, the `MEMCPY_ASYNC` of `aclrtMemcpy`, profiling markers, kernels launched outside any ACLNN call.
Each becomes a step of the replay, so none is dropped:

* a task on a communication stream (one that runs HCCL tasks) is a `task` step of kind `communication` with
  its recorded duration, on that stream;
* an `EVENT_WAIT` is a `wait_event` step on its stream, paired with the `EVENT_RECORD` on another stream that
  completed last before the wait ended (the one that released it), which becomes a `record_event` step; when
  that record would be submitted after the wait (neither has a launch link), the wait is a recorded task that
  holds its stream for the time it waited in the profile;
* anything else is a `task` step of kind `recorded`: it occupies its stream for its recorded time.

A job import (several ranks) replaces each HCCL op's sub-tasks by one `collective` step
(opsim.importer.collectives): the ranks then meet in it.

A task launched by a host event (its HostToDevice flow starts in an `AscendCL@aclrtRecordEvent`, `hcom_...`,
`aclrtMemcpyAsync` outside any call) is placed on that host thread at that event's time, in order with the
thread's calls, as the application issued it; a task without a launch link is placed on the `device_replay`
thread at its recorded start.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opsim.ingest import TraceEvent, TraceView
import bisect

HCCL_TASK_TYPES = frozenset({"NOTIFY WAIT", "NOTIFY RECORD", "NOTIFY_WAIT", "NOTIFY_RECORD", "WRITE VALUE", "SDMA",
                             "RDMA", "REDUCE_INLINE", "REDUCE INLINE", "COMMUNICATION", "HCCL", "MEMCPY",
                             "LOCAL_COPY", "REDUCE_TBE"})
"""Task types of HCCL's sub-tasks in torch_npu's device rows (a stream running them is a communication stream)."""
EVENT_RECORD_TYPES = frozenset({"EVENT_RECORD_SQE", "EVENT_RECORD"})
EVENT_WAIT_TYPES = frozenset({"EVENT_WAIT_SQE", "EVENT_WAIT"})
DEVICE_THREAD = "device_replay"
"""The host thread of the replay that submits the device tasks no host event launched, at their recorded start."""


@dataclass
class DeviceItem:
    """One non-call device task as a replay step: kind is communication, recorded, record or wait."""

    kind: str
    stream: int
    name: str
    task_type: str
    start_ns: int
    dur_ns: int
    host_tid: Any = None
    """The host thread that launched it (None: no launch link)."""
    host_ns: int = 0
    """When the host launched it (its launching event's start), else its recorded device start."""
    host_end_ns: int = 0
    event: str | None = None
    """record / wait: the replay's event name."""
    collective: dict[str, Any] | None = None
    """kind collective: the `collective` step (without its stream) that replaces an HCCL op's sub-tasks in a
    job import (opsim.importer.collectives)."""
    lane: int = 0
    """Overlapping tasks of one stream (HCCL's sub-tasks run on several planes under one stream id) go to
    lanes, replay streams `stream_<id>_<lane>` beside `stream_<id>`, so the replay overlaps them as the profile
    did; an event record goes on the lane that finishes last before it, a wait on the lane of the task after it."""

    queued: bool = False
    """Launched from the task-queue thread: placed at its Enqueue on the issuing thread."""
    lanes: int = 1
    """A record or wait: the lanes of its stream (it is replayed on each)."""
    source: "DeviceItem | None" = None
    """A wait: the record it waits for."""
    join: str | None = None
    """A wait on a stream split into lanes: the prefix of the events its lanes join by."""
    placed_by: "DeviceItem | None" = None
    """A task without a launch link on a stream whose other tasks have one: the launched task before it on
    its stream, after which it is placed (stream order is submission order)."""

    @property
    def label(self) -> int | str:
        return self.stream if self.lane == 0 else f"{self.stream}_{self.lane}"


@dataclass
class DeviceTasks:
    items: list[DeviceItem] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    streams: set[int] = field(default_factory=set)


def task_type_of(e: TraceEvent) -> str:
    return str(e.args.get("Task Type", "") or e.name)


def collect(view: TraceView, launched: list[tuple[TraceEvent, TraceEvent]], unlinked: list[TraceEvent],
            issuer: Any = None) -> DeviceTasks:
    """`launched`: (host event, device task) pairs of tasks launched outside the calls; `unlinked`: tasks
    without a launch link; `issuer(host event)`: the Enqueue that queued a task-queue thread's event (or None).
    All become DeviceItems, in time order, with events paired."""
    raw: list[tuple[TraceEvent, TraceEvent | None]] = [(k, h) for h, k in launched] + [(k, None) for k in unlinked]
    comm_streams = {view.stream_id(k) for k, _ in raw
                    if task_type_of(k).upper() in HCCL_TASK_TYPES or k.name.startswith("hcom_")}
    out = DeviceTasks()
    for k, host in raw:
        sid = view.stream_id(k) or 0
        tt = task_type_of(k)
        up = tt.upper()
        if up in EVENT_RECORD_TYPES or k.name == "EVENT_RECORD":
            kind = "record"
        elif up in EVENT_WAIT_TYPES or k.name == "EVENT_WAIT":
            kind = "wait"
        elif sid in comm_streams:
            kind = "communication"
        else:
            kind = "recorded"
        item = DeviceItem(kind, sid, k.name, tt, k.ts, k.dur)
        queued = issuer(host) if issuer is not None and host is not None else None
        if queued is not None:
            item.host_tid, item.host_ns, item.host_end_ns, item.queued = queued.tid, queued.ts, queued.end, True
        elif host is not None:
            item.host_tid, item.host_ns, item.host_end_ns = host.tid, host.ts, host.end
        else:
            item.host_ns, item.host_end_ns = k.ts, k.ts
        out.items.append(item)
    _follow_launched(out.items)
    assign_lanes(out.items)
    out.streams = {i.label for i in out.items}
    _pair_events(out)
    out.items.sort(key=lambda i: (i.host_ns, i.start_ns))
    return out


def _follow_launched(items: list[DeviceItem]) -> None:
    """A task without a launch link (HCCL's sub-tasks, which HCCL launches itself) on a stream that has launched
    tasks is placed right after the launched task before it on the stream, on that task's thread: submitted in
    stream order with the events around it, not at its device start (which a replayed host reaches at another
    moment than the real one)."""
    by_stream: dict[int, list[DeviceItem]] = {}
    for i in items:
        by_stream.setdefault(i.stream, []).append(i)
    for evs in by_stream.values():
        if all(i.host_tid is None for i in evs) or all(i.host_tid is not None for i in evs):
            continue
        prev: DeviceItem | None = None
        for i in sorted(evs, key=lambda i: (i.start_ns, i.dur_ns)):
            if i.host_tid is not None:
                prev = i
            elif prev is not None:
                i.host_tid, i.host_ns, i.host_end_ns, i.queued = prev.host_tid, prev.host_ns, prev.host_ns, prev.queued
                i.placed_by = prev


def assign_lanes(items: list[DeviceItem]) -> None:
    """Per stream, each task that starts before the previous one on its lane ended goes to the first lane
    free by its start (greedy interval colouring, in start order)."""
    by_stream: dict[int, list[DeviceItem]] = {}
    for i in items:
        by_stream.setdefault(i.stream, []).append(i)
    for evs in by_stream.values():
        ends: list[int] = []
        order = sorted(evs, key=lambda i: (i.start_ns, i.dur_ns))
        for i in order:
            if i.kind == "record":  # after the lane that finishes last: the record completes when all have
                lane = max(range(len(ends)), key=lambda k: ends[k]) if ends else 0
            elif i.kind == "wait":
                continue
            else:
                lane = next((k for k, e in enumerate(ends) if e <= i.start_ns), len(ends))
            if lane == len(ends):
                ends.append(0)
            ends[lane] = max(ends[lane], i.start_ns + i.dur_ns)
            i.lane = lane
        for i in order:  # a record or wait is made on every lane (see _pair_events)
            if i.kind in ("record", "wait"):
                i.lane, i.lanes = 0, max(1, len(ends))


PAIR_WINDOW = 64
"""A wait's record is looked for among the 64 records that completed last before it (opsim's bound, to keep
the import linear; a profile's stream pairs sync far more often than that)."""


def _pair_events(out: DeviceTasks) -> None:
    """Each wait gets the record on another stream that completed last before the wait ended among those
    submitted before it (a wait holds for the record already issued, as aclrtStreamWaitEvent does), else the
    first after it; a record no wait needs stays a record of its own event (harmless, as in the profile).
    On a stream split into lanes a record is made on every lane and a wait waits on every lane, so the lanes
    stay in step at the stream's events as the one real stream did."""
    records = sorted((i for i in out.items if i.kind == "record"), key=lambda i: i.start_ns + i.dur_ns)
    for n, r in enumerate(records):
        r.event = f"ev_{n}"
    ends = [r.start_ns + r.dur_ns for r in records]
    for w in (i for i in out.items if i.kind == "wait"):
        w_end = w.start_ns + w.dur_ns
        hi = bisect.bisect_right(ends, w_end)
        j = next((m for m in range(hi - 1, max(-1, hi - 1 - PAIR_WINDOW), -1)
                  if records[m].stream != w.stream and _before(records[m], w)), -1)
        if j < 0:
            j = next((m for m in range(hi, min(len(records), hi + PAIR_WINDOW))
                      if records[m].stream != w.stream), -1)
        if j < 0:  # no record on another stream: it waited on nothing the profile shows
            w.kind = "recorded"
            continue
        if not _before(records[j], w):
            # the record is placed after the wait: the wait would pass at once, so it holds its stream for the
            # time it waited in the profile
            w.kind = "recorded"
            continue
        w.event = records[j].event
        w.source = records[j]
    out.events = [f"{r.event}_{lane}" if lane else r.event for r in records for lane in range(r.lanes)]
    for n, w in enumerate(i for i in out.items if i.kind == "wait" and i.lanes > 1):
        w.join = f"jn_{n}"
        out.events += [f"{w.join}_{lane}" for lane in range(1, w.lanes)] + [f"{w.join}_go"]


_COLLECTIVE_ORDER = ("collective", "group", "bytes", "dtype", "stream", "name", "transit_us", "idle_us", "_op")
"""A collective step's keys in writing order (`_op`, the profile's op name, is dropped before writing)."""


def _before(record: DeviceItem, wait: DeviceItem) -> bool:
    """Whether the replay submits `record` before `wait` (placed earlier, or at the same time on the same
    thread in device order)."""
    if record.host_ns != wait.host_ns:
        return record.host_ns < wait.host_ns
    return record.host_tid == wait.host_tid and record.start_ns <= wait.start_ns


def step_of(item: DeviceItem, stream_name: Any) -> list[dict[str, Any]]:
    """The scenario steps replaying `item` (a record or wait on a stream split into lanes: one per lane)."""
    if item.kind == "collective" and item.collective is not None:
        step = dict(item.collective)
        step["stream"] = stream_name(item.label)
        return [{k: step[k] for k in _COLLECTIVE_ORDER if k in step}]
    if item.kind == "record":
        return [{"record_event": {"event": f"{item.event}_{lane}" if lane else item.event,
                                  "stream": stream_name(_lane_label(item.stream, lane))}}
                for lane in range(item.lanes)]
    if item.kind == "wait":
        src = item.source
        lane0 = stream_name(item.stream)
        waits = [{"wait_event": {"event": f"{item.event}_{rl}" if rl else item.event, "stream": lane0}}
                 for rl in range(src.lanes if src is not None else 1)]
        if item.lanes == 1:
            return waits
        # the one real stream waited after all its earlier tasks: the lanes join on lane 0, lane 0 waits, and
        # the others go on after it
        lanes = [stream_name(_lane_label(item.stream, lane)) for lane in range(1, item.lanes)]
        j = item.join
        return ([{"record_event": {"event": f"{j}_{n}", "stream": s}} for n, s in enumerate(lanes, 1)]
                + [{"wait_event": {"event": f"{j}_{n}", "stream": lane0}} for n in range(1, item.lanes)]
                + waits + [{"record_event": {"event": f"{j}_go", "stream": lane0}}]
                + [{"wait_event": {"event": f"{j}_go", "stream": s}} for s in lanes])
    return [{"task": {"stream": stream_name(item.label), "kind": item.kind, "name": item.name[:256] or item.kind,
                      "task_type": item.task_type[:64] or item.kind.upper(),
                      "duration_us": round(item.dur_ns / 1000.0, 3)}}]


def _lane_label(stream: int, lane: int) -> int | str:
    return stream if lane == 0 else f"{stream}_{lane}"


__all__ = ["DeviceItem", "DeviceTasks", "collect", "step_of", "DEVICE_THREAD"]
