"""Read a torch_npu / msprof trace_view.json (Chrome trace) with exact integer-nanosecond times.

Times in these files are microseconds written as decimal strings ("1704161511420306.491") or floats
(21.100210791105802); both are parsed as decimals, so nanoseconds are exact and never pass through a float.
Besides the complete ('X') events the reader keeps flow pairs ('s'/'f': HostToDevice, torch_to_npu,
enqueue_to_dequeue, ...), process and thread names, and offers the selections calibration needs: the
AscendCL API events of the host, the kernels on the "Ascend Hardware" device rows, and which host call
launched which kernel.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from opsim.errors import ProfileFormatError
from opsim.ingest.json_stream import iter_trace_events

ACL_PREFIX = "AscendCL@"
PHASE1_SUFFIX = "GetWorkspaceSize"
DEVICE_PROCESS = "Ascend Hardware"
LAUNCH_FLOW = "HostToDevice"
_STREAM_RE = re.compile(r"Stream\s+(\d+)", re.IGNORECASE)
KEPT_ARGS = ("Task Type", "Stream Id", "Task Id", "Physic Stream Id", "correlation_id", "stream id", "task id",
             "task type", "data_type", "count", "alg_type", "connection_id")
"""The args an event keeps (task kind, stream, task id, queue correlation, an HCCL op's dtype, element count and
algorithm, the host-device connection id); the rest (call stacks, PMU) is dropped while reading, so memory grows
with the events, not with what they carry."""
_NO_ARGS: dict = {}


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """A complete ('X') event; ts and dur in integer nanoseconds."""

    name: str
    pid: int | str
    tid: int | str
    ts: int
    dur: int
    cat: str | None = None
    args: dict = field(default_factory=dict, compare=False, hash=False)
    index: int = 0

    @property
    def end(self) -> int:
        return self.ts + self.dur


@dataclass(frozen=True)
class FlowPoint:
    pid: int | str
    tid: int | str
    ts: int


@dataclass(frozen=True)
class FlowPair:
    """A flow arrow: its start ('s') and finish ('f') point, matched by category and id."""

    cat: str
    id: str
    name: str
    start: FlowPoint
    end: FlowPoint


@dataclass(frozen=True)
class AclApiEvent:
    """An AscendCL@ host event classified: kind is phase1, phase2, runtime, tiling or other."""

    event: TraceEvent
    api: str
    kind: str


@dataclass(frozen=True)
class LaunchLink:
    """A host AscendCL call and the device kernels its HostToDevice flows point at."""

    host: TraceEvent
    kernels: tuple[TraceEvent, ...]


def classify_acl_name(name: str) -> tuple[str, str]:
    """(api, kind) of an event name after 'AscendCL@': aclnnAddGetWorkspaceSize -> ('aclnnAdd', 'phase1')."""
    if name.startswith("aclnn"):
        if name.endswith(PHASE1_SUFFIX) and len(name) > len(PHASE1_SUFFIX) + 5:
            return name[: -len(PHASE1_SUFFIX)], "phase1"
        return name, "phase2"
    if name.startswith("aclrt"):
        return name, "runtime"
    if name.endswith("_Tiling"):
        return name[: -len("_Tiling")], "tiling"
    return name, "other"


@dataclass
class TraceView:
    """The events of one trace_view.json."""

    path: Path
    events: list[TraceEvent]
    flows: list[FlowPair]
    process_names: dict[int | str, str]
    thread_names: dict[tuple[int | str, int | str], str]
    skipped: dict[str, int] = field(default_factory=dict)
    """Rows of the source left out of the view, by reason (a db export's HCCL op tasks, shown as HCCL ops)."""

    def device_pids(self) -> set[int | str]:
        return {pid for pid, n in self.process_names.items() if n == DEVICE_PROCESS}

    def acl_api_events(self) -> list[AclApiEvent]:
        """AscendCL@ host events in file order, each with its API name and kind."""
        out = []
        for e in self.events:
            if e.name.startswith(ACL_PREFIX):
                api, kind = classify_acl_name(e.name[len(ACL_PREFIX):])
                out.append(AclApiEvent(event=e, api=api, kind=kind))
        return out

    def stream_id(self, e: TraceEvent) -> int | None:
        """The stream of a device event: from its thread name ('Stream 3') or its 'Stream Id' arg."""
        m = _STREAM_RE.search(self.thread_names.get((e.pid, e.tid), ""))
        if m:
            return int(m.group(1))
        sid = e.args.get("Stream Id")
        return int(sid) if isinstance(sid, (int, str)) and str(sid).isdigit() else None

    def device_kernels(self) -> list[TraceEvent]:
        """Events on the "Ascend Hardware" process rows, in file order."""
        pids = self.device_pids()
        return [e for e in self.events if e.pid in pids]

    def launch_links(self) -> list[LaunchLink]:
        """Host AscendCL event -> the device kernel(s) it launched, following HostToDevice flows.

        A flow starts inside the innermost AscendCL event of its host thread and finishes at the start of a
        kernel on a device row; a host event without flows is not listed. One sweep per thread (linear).
        A device task no flow reached is linked to the AscendCL event with its `connection_id` (torch_npu draws
        its HostToDevice flows from these ids, but not for event records and waits, whose host events are
        `aclrtRecordEvent` / `aclrtStreamWaitEvent`)."""
        hosts: dict[tuple, list[TraceEvent]] = {}
        for e in self.events:
            if e.name.startswith(ACL_PREFIX):
                hosts.setdefault((e.pid, e.tid), []).append(e)
        kernels: dict[tuple, dict[int, list[TraceEvent]]] = {}
        for e in self.device_kernels():
            kernels.setdefault((e.pid, e.tid), {}).setdefault(e.ts, []).append(e)
        points: dict[tuple, list[FlowPair]] = {}
        for f in self.flows:
            if f.cat == LAUNCH_FLOW and (f.start.pid, f.start.tid) in hosts:
                points.setdefault((f.start.pid, f.start.tid), []).append(f)
        linked: dict[int, tuple[TraceEvent, list[TraceEvent]]] = {}
        for key, flows in points.items():
            flows.sort(key=lambda f: f.start.ts)
            for f, host in zip(flows, innermost_at(hosts[key], [f.start.ts for f in flows])):
                targets = kernels.get((f.end.pid, f.end.tid), {}).get(f.end.ts, [])
                if host is None or not targets:
                    continue
                entry = linked.setdefault(host.index, (host, []))
                for k in targets:
                    if k not in entry[1]:
                        entry[1].append(k)
        _link_by_connection(hosts, self.device_kernels(), linked)
        return [LaunchLink(host=h, kernels=tuple(ks)) for _, (h, ks) in sorted(linked.items())]


def _connection(e: TraceEvent) -> int | None:
    v = e.args.get("connection_id")
    return v if type(v) is int else None


def _link_by_connection(hosts: dict[tuple, list[TraceEvent]], kernels: list[TraceEvent],
                        linked: dict[int, tuple[TraceEvent, list[TraceEvent]]]) -> None:
    """Device tasks no flow reached, linked to the host AscendCL event with the same `connection_id`."""
    flowed = {k.index for _, ks in linked.values() for k in ks}
    by_id: dict[int, list[TraceEvent]] = {}
    for evs in hosts.values():
        for e in evs:
            c = _connection(e)
            if c is not None:
                by_id.setdefault(c, []).append(e)
    for k in kernels:
        c = _connection(k)
        cands = by_id.get(c) if c is not None and k.index not in flowed else None
        if not cands:
            continue
        # an id seen twice (a profile stitched from several): the last host event launched before the task
        host = cands[0] if len(cands) == 1 else max((e for e in cands if e.ts <= k.ts), default=cands[0],
                                                      key=lambda e: (e.ts, e.index))
        linked.setdefault(host.index, (host, []))[1].append(k)


def innermost_at(events: list[TraceEvent], times: list[int]) -> list[TraceEvent | None]:
    """For each time (ascending), the shortest of `events` (one thread's, properly nested) holding it
    (ts <= t <= end), else None: one sweep with a stack of the open events."""
    order = sorted(events, key=lambda e: (e.ts, -e.dur, e.index))
    out: list[TraceEvent | None] = []
    stack: list[TraceEvent] = []
    i = 0
    for t in times:
        while i < len(order) and order[i].ts <= t:
            stack.append(order[i])
            i += 1
        while stack and stack[-1].ts + stack[-1].dur < t:
            stack.pop()
        out.append(stack[-1] if stack else None)
    return out


#: bound on a time in microseconds (epoch times are ~1.7e15 us; 1e20 us is ~3 million years): larger or non-finite values are damage, not data.
MAX_TIME_US = Decimal("1e20")


def us_to_ns(value: Any) -> int:
    """A microsecond value (decimal string, int, Decimal or float) as integer nanoseconds, rounded half-even.

    Raises ValueError for anything that is not a finite time within +-MAX_TIME_US."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)):
        raise ValueError(f"{type(value).__name__} is not a time")
    if isinstance(value, float):
        value = repr(value)
    try:
        d = Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a number") from None
    if not d.is_finite() or d.copy_abs() > MAX_TIME_US:
        raise ValueError(f"{value!r} is not a finite time below {MAX_TIME_US:.0e} us")
    return int((d * 1000).to_integral_value())


def _ident(value: Any) -> int | str:
    """A pid or tid as the file gives it (an integer or a string); anything else is damage."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{value!r} is not a process or thread id")
    return value


def read_trace_view(path: str | Path, progress: Callable[[int, int], None] | None = None) -> TraceView:
    """Read trace_view.json (a JSON list of events, or torch_npu's {"traceEvents": [...]} object).

    The file is streamed (`opsim.ingest.json_stream`): time and memory grow with the events kept, not with the
    file's call stacks and counters. `progress(bytes_read, total_bytes)` is called as the file is read."""
    p = Path(path)
    events: list[TraceEvent] = []
    process_names: dict = {}
    thread_names: dict = {}
    starts: dict[tuple[str, str], tuple[str, FlowPoint]] = {}
    ends: dict[tuple[str, str], FlowPoint] = {}
    names: dict[str, str] = {}
    for i, ev in iter_trace_events(p, "trace_view.json", progress):
        ph = ev.get("ph")
        field_name = "pid"
        try:
            if ph == "X":
                pid = _ident(ev.get("pid"))
                field_name = "tid"
                tid = _ident(ev.get("tid"))
                field_name = "ts"
                ts = us_to_ns(ev["ts"])
                field_name = "dur"
                dur = us_to_ns(ev.get("dur", 0))
                if dur < 0:
                    raise ValueError("a duration is not negative")
                args = ev.get("args")
                cat = ev.get("cat")
                name = str(ev.get("name", ""))
                name = names.setdefault(name, name)
                kept = {k: _plain(args[k]) for k in KEPT_ARGS if k in args} if isinstance(args, dict) else None
                events.append(TraceEvent(
                    name=name, pid=pid, tid=tid, ts=ts, dur=dur,
                    cat=names.setdefault(cat, cat) if isinstance(cat, str) else None,
                    args=kept or _NO_ARGS, index=len(events)))
            elif ph == "M":
                args = ev.get("args")
                name = args.get("name") if isinstance(args, dict) else None
                if name is None:
                    continue
                if ev.get("name") == "process_name":
                    process_names[_ident(ev.get("pid"))] = str(name)
                elif ev.get("name") == "thread_name":
                    field_name = "tid"
                    key = (_ident(ev.get("pid")), _ident(ev.get("tid")))
                    thread_names[key] = str(name)
            elif ph in ("s", "f"):
                if ev.get("id") is None:  # a flow without an id cannot be matched: not a launch link
                    continue
                key = (str(ev.get("cat")), str(ev.get("id")))
                pid = _ident(ev.get("pid"))
                field_name = "tid"
                tid = _ident(ev.get("tid"))
                field_name = "ts"
                point = FlowPoint(pid=pid, tid=tid, ts=us_to_ns(ev["ts"]))
                if ph == "s":
                    starts.setdefault(key, (str(ev.get("name", "")), point))
                else:
                    ends.setdefault(key, point)
        except KeyError as exc:
            raise ProfileFormatError(
                f"{p}: event {i} ({ev.get('name')!r}, ph {ph!r}) has no {exc.args[0]!r} field; give an "
                f"unmodified trace_view.json") from None
        except (ValueError, TypeError) as exc:
            raise ProfileFormatError(
                f"{p}: event {i} ({str(ev.get('name'))[:80]!r}, ph {ph!r}), field {field_name!r}: {exc} (got "
                f"{str(ev.get(field_name))[:80]!r}); give an unmodified trace_view.json") from None
    flows = [FlowPair(cat=k[0], id=k[1], name=starts[k][0], start=starts[k][1], end=ends[k])
             for k in starts if k in ends]
    return TraceView(path=p, events=events, flows=flows, process_names=process_names, thread_names=thread_names)


def _plain(value: Any) -> Any:
    """Decimals parsed from args back to int/float so args look like ordinary JSON values."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
