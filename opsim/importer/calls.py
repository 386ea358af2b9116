"""From a real trace_view.json to the ACLNN calls each host thread made, in order, with what they launched.

The trace is read by `opsim.ingest.read_trace_view`; this module only interprets it:

* a **call** is one phase-2 host event (`AscendCL@aclnnXxx`, or `AscendCL@aclopCompileAndExecute` for an
  old-style single-op call). Under torch_npu's task queue it runs on the consumer thread inside a
  `Dequeue@...` event whose `correlation_id` names the `Enqueue` of the issuing Python thread: the call
  belongs to that issuing thread, and its phase 2 to the task-queue thread. Without a queue the call belongs
  to the thread that ran phase 2.
* its **phase 1** is the `AscendCL@aclnnXxxGetWorkspaceSize` the issuing thread ran since its previous call
  (before the Enqueue); no phase 1 means torch_npu's PTA hash cache hit.
* its **kernels** are the device events its HostToDevice flows point at (`TraceView.launch_links`), from any
  host event nested in the phase-2 event (tiling events included); a kernel without one is placed by its
  torch_to_npu flow (from the framework op on the issuing thread).
* **syncs** are the issuing threads' `aclrtSynchronize*` events; other runtime calls (memcpy, malloc) stay
  host time; `ProfilerStep#n` events bound the steps.

What cannot be placed (a phase 1 never followed by a call, a dequeue without its enqueue, a kernel no call
launched, an unknown AscendCL event) is counted in the `ImportReport`, never dropped silently.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Any

from opsim.importer.device_tasks import collect
from opsim.importer.report import ImportReport
from opsim.ingest import TraceEvent, TraceView
from opsim.ingest.trace_view import innermost_at

ACLOP_CALL = "aclopCompileAndExecute"
SYNC_APIS = {"aclrtSynchronizeStream": "stream", "aclrtSynchronizeStreamWithTimeout": "stream",
             "aclrtSynchronizeDevice": "device"}
"""Runtime calls replayed as synchronisations (the rest of the runtime calls stay host time)."""
HOST_ONLY_APIS = frozenset({"aclrtMemcpy", "aclrtMalloc", "aclrtFree", "aclMallocMemInner", "aclCreateTensorDesc",
                            "aclCreateDataBuffer", "aclDestroyTensorDesc", "aclDestroyDataBuffer",
                            "aclopCreateAttr", "aclopDestroyAttr", "opCompile", "aclrtMemcpyAsync",
                            "aclrtMemset", "aclrtMemsetAsync"})
"""AscendCL calls whose host time stays in the gaps between calls (opsim has no step for them)."""
HOST_ONLY_APIS = HOST_ONLY_APIS | {"aclrtCreateEvent", "aclrtCreateEventWithFlag", "aclrtCreateEventExWithFlag",
                                   "aclrtDestroyEvent", "aclrtQueryEventStatus", "aclrtQueryEvent",
                                   "aclrtSetCurrentContext", "aclrtGetCurrentContext", "aclrtSetDevice",
                                   "aclrtGetDevice", "aclrtSynchronizeEvent"}
LAUNCHING_APIS = frozenset({"aclrtRecordEvent", "aclrtStreamWaitEvent"})
"""Runtime calls whose device task (EVENT_RECORD / EVENT_WAIT, linked by its connection_id) is replayed as a
record_event / wait_event step at the call's place; `hcom_*` (HCCL's collectives) launch communication tasks."""
QUEUED_RUNTIME_TASKS = frozenset({"record_event", "wait_event", "destroy_event", "lazy_destroy_event",
                                  "HcclAllreduce", "HcclBroadcast", "HcclAllGather", "HcclReduceScatter",
                                  "HcclReduce", "HcclSend", "HcclRecv", "HcclAlltoAll", "HcclAlltoAllV",
                                  "HcclBarrier", "acl_memcpy_host_to_device", "acl_memcpy_device_to_host",
                                  "acl_memcpy_device_to_device", "acl_memset"})
"""torch_npu task-queue entries that are no ACLNN call (`Dequeue@record_event`, `Dequeue@HcclAllreduce`, ...):
their AscendCL events launch the events, collectives and copies replayed as device tasks."""
_STEP_RE = re.compile(r"^ProfilerStep#(\d{1,18})$")


@dataclass
class Kernel:
    """One device kernel a call launched (type, core, block dim and tensors from kernel_details.csv if joined)."""

    name: str
    stream: int
    start_ns: int
    dur_ns: int
    task_type: str
    op_type: str | None = None
    block_dim: int = 1
    input_shapes: tuple = ()
    input_dtypes: tuple = ()
    task_id: int | None = None
    """The device row's `Task Id` (with the stream and start, the key of its kernel_details.csv row)."""
    work: tuple[float, float, float] | None = None
    """(flops, bytes moved, element size) of its kernel_details.csv row, as the calibration counts them: what
    the predictor is asked with `repredict` (opsim.ops.profiled)."""


def join_kernel_details(pc: "ProfileCalls", rows: Any, report: ImportReport) -> int:
    """Fill each kernel's op type, core, block dim, shapes and dtypes from its kernel table row: the row with the
    same stream id, task id and start time (what identifies a task), else (a table without those columns) the row
    with the same start time and name. `rows` (a KernelTable's rows, or a stream of a db's kernel rows) is read
    once, row by row: only the calls' kernels are indexed. Rows matching no replayed kernel are counted. Returns
    the number joined."""
    from opsim.ops.profiled import TASK_TYPES  # lazy: keeps opsim.opdev, opsim.ops out of importing opsim.importer.calls
    from opsim.calibration.features import record_work  # lazy: keeps numpy out of importing opsim.importer.calls
    by_task: dict[tuple, Kernel] = {}
    by_name: dict[tuple, list[Kernel]] = {}
    for c in pc.calls:
        for k in c.kernels:
            if k.task_id is not None:
                by_task.setdefault((k.stream, k.task_id, k.start_ns), k)
            by_name.setdefault((k.start_ns, k.name), []).append(k)
    done: set[int] = set()
    joined = n_rows = 0
    for r in getattr(rows, "rows", rows):
        n_rows += 1
        if r.start_ns is None:
            continue
        k = by_task.get((r.stream_id, r.task_id, r.start_ns)) if r.stream_id is not None and r.task_id is not None \
            else None
        if k is None or id(k) in done:  # by name: a kernel without a task id, or a row without one
            keyed = r.stream_id is not None and r.task_id is not None
            k = next((x for x in by_name.get((r.start_ns, r.name), ())
                      if id(x) not in done and (x.task_id is None or not keyed)), None)
        if k is None:
            continue
        done.add(id(k))
        k.op_type, k.block_dim = r.op_type, max(1, int(r.block_dim or 1))
        k.task_type = r.core if r.core in TASK_TYPES else k.task_type
        k.input_shapes, k.input_dtypes = tuple(tuple(s) for s in r.input_shapes), tuple(r.input_dtypes)
        if r.op_type:
            _fam, flops, nbytes, _bd, itemsize = record_work(r)
            k.work = (flops, nbytes, itemsize)
        joined += 1
    report.warn("kernel_details.csv row matching no replayed kernel (stream, task id and start time)",
                n_rows - joined)
    unjoined = sum(len(c.kernels) for c in pc.calls) - joined
    report.note("kernel without a kernel_details.csv row (task type from the trace, block dim 1)", unjoined)
    return joined


@dataclass
class Call:
    """One ACLNN (or aclop) call as the profile shows it."""

    api: str
    """Phase-2 API name (`aclnnInplaceAdd`, or the aclop op type such as `Conv2D`)."""
    kind: str
    """'aclnn' or 'aclop'."""
    thread: Any
    """The issuing thread id."""
    start_ns: int
    end_ns: int
    """Host interval of the call on the issuing thread (enqueue, or phase 1 + phase 2 without a queue)."""
    phase2: TraceEvent
    phase1: TraceEvent | None = None
    phase1_api: str | None = None
    queued: bool = False
    kernels: list[Kernel] = field(default_factory=list)


@dataclass
class Sync:
    kind: str
    """'stream' or 'device'."""
    thread: Any
    start_ns: int
    end_ns: int


@dataclass
class ProfileCalls:
    """Everything the scenario is built from."""

    calls: list[Call]
    syncs: list[Sync]
    steps: list[tuple[int, int, int]]
    """(step number, start ns, end ns), in time order."""
    threads: list[Any]
    """Issuing thread ids in order of their first call."""
    consumer: Any | None
    """The task-queue consumer thread id (None: no task queue)."""
    origin_ns: int
    """Start of the profile: the first step, or the first host event."""
    streams: list[int]
    device: Any = None
    """The device tasks that are no call's kernels (opsim.importer.device_tasks.DeviceTasks)."""


def _contains(outer: TraceEvent, inner: TraceEvent) -> bool:
    return outer.ts <= inner.ts and inner.end <= outer.end


def _task_type(e: TraceEvent) -> str:
    """The replay's task type of a call's device row: its core, or DSA_SQE / PCIE_DMA_SQE / SDMA_SQE kept as
    they are (a DSA kernel, a MEMCPY_ASYNC copy: neither runs on an AI Core, and torch_npu counts no copy in
    Computing); anything else is an AI Core kernel."""
    t = str(e.args.get("Task Type", "")).upper()
    if t in ("AI_CPU", "AICPU"):
        return "AI_CPU"
    if t in ("AI_VECTOR_CORE", "AIV"):
        return "AI_VECTOR_CORE"
    if t in ("MIX_AIC", "MIX_AIV", "DSA_SQE", "PCIE_DMA_SQE", "SDMA_SQE"):
        return t
    return "AI_CORE"


def _task_id(e: TraceEvent) -> int | None:
    v = e.args.get("Task Id")
    return v if type(v) is int else None


def read_calls(view: TraceView, report: ImportReport) -> ProfileCalls:
    """The calls, syncs and steps of a trace (see the module docstring)."""
    acl = view.acl_api_events()
    dequeues, enqueues, consumer = _queue_events(view, report)
    # phase-2 events and the host events nested in them (for launch links)
    phase2 = sorted((a.event for a in acl if a.kind == "phase2" or a.api == ACLOP_CALL), key=lambda e: (e.ts, e.index))
    p2_by_thread: dict[Any, list[TraceEvent]] = {}
    for e in phase2:
        p2_by_thread.setdefault(e.tid, []).append(e)
    kernels_of, placed, outside = _kernels_by_call(view, p2_by_thread)
    calls, used_p2 = _queued_calls(enqueues, dequeues, p2_by_thread, kernels_of, report)
    calls += _direct_calls(phase2, used_p2, consumer, kernels_of, report)
    calls.sort(key=lambda c: (c.start_ns, c.phase2.index))
    _attach_phase1(calls, acl, report)
    _attach_framework_flows(view, calls, placed)
    device = _other_device_tasks(view, outside, placed, report, _issuer(dequeues, enqueues, consumer))
    syncs = _syncs_and_host_apis(acl, consumer, report)
    return _profile_calls(view, calls, syncs, consumer, device)


def _queue_events(view: TraceView, report: ImportReport) -> tuple[dict, list[TraceEvent], Any]:
    """(Dequeue by correlation id, Enqueues in time order, the task-queue consumer thread): torch_npu's task queue
    as the trace shows it; malformed ids and a second consumer are reported."""
    dequeues = {_correlation(e): e for e in view.events
                if e.name.startswith("Dequeue") and _correlation(e) is not None}
    enqueues = sorted((e for e in view.events if e.name.startswith("Enqueue") and _correlation(e) is not None),
                      key=lambda e: (e.ts, e.index))
    bad = sum(1 for e in view.events if e.name.startswith(("Enqueue", "Dequeue")) and "correlation_id" in e.args
              and _correlation(e) is None)
    report.warn("Enqueue/Dequeue whose correlation_id is not an integer (not replayed)", bad)
    deq_by_thread: dict[Any, list[TraceEvent]] = {}
    for d in dequeues.values():
        deq_by_thread.setdefault(d.tid, []).append(d)
    consumer = max(deq_by_thread, key=lambda t: len(deq_by_thread[t])) if deq_by_thread else None
    if len(deq_by_thread) > 1:
        report.warn("dequeue on a second consumer thread", sum(len(v) for t, v in deq_by_thread.items()
                                                              if t != consumer))
    return dequeues, enqueues, consumer


def _kernels_by_call(view: TraceView, p2_by_thread: dict[Any, list[TraceEvent]]) -> tuple[dict, set, list]:
    """(phase-2 event index -> its kernels, indices of the kernels placed so, (host event, device task) of the
    launches outside every call), from the trace's launch links."""
    kernels_of: dict[int, list[Kernel]] = {}
    placed: set[int] = set()
    outside: list[tuple[TraceEvent, TraceEvent]] = []
    for link, owner in _owners(view.launch_links(), p2_by_thread):
        if owner is None:
            outside += [(link.host, k) for k in link.kernels]
            continue
        for k in link.kernels:
            if k.index in placed:
                continue
            placed.add(k.index)
            kernels_of.setdefault(owner.index, []).append(
                Kernel(k.name, view.stream_id(k) or 0, k.ts, k.dur, _task_type(k), task_id=_task_id(k)))
    return kernels_of, placed, outside


def _queued_calls(enqueues: list[TraceEvent], dequeues: dict, p2_by_thread: dict[Any, list[TraceEvent]],
                  kernels_of: dict, report: ImportReport) -> tuple[list[Call], set[int]]:
    """The queued calls (Enqueue -> Dequeue -> the phase 2 inside the dequeue) and the phase-2 events they use."""
    p2_starts = {t: [e.ts for e in v] for t, v in p2_by_thread.items()}
    calls: list[Call] = []
    used_p2: set[int] = set()
    for enq in enqueues:
        deq = dequeues.get(_correlation(enq))
        if deq is None:
            report.warn("Enqueue without its Dequeue (the queued work is not in the profile)", 1)
            continue
        evs = p2_by_thread.get(deq.tid, [])
        lo = bisect.bisect_left(p2_starts.get(deq.tid, []), deq.ts)  # only calls starting inside the dequeue
        hi = bisect.bisect_right(p2_starts.get(deq.tid, []), deq.end)
        inner = [e for e in evs[lo:hi] if _contains(deq, e)]
        if not inner:
            if deq.name.split("@", 1)[-1] in QUEUED_RUNTIME_TASKS:
                report.note(f"{deq.name}: a queued runtime task, replayed by its AscendCL event", 1)
            else:
                report.warn("Dequeue without an ACLNN or aclop call inside", 1, example=deq.name)
            continue
        p2 = inner[0]
        if len(inner) > 1:
            report.warn("Dequeue with more than one call inside (the first is replayed)", len(inner) - 1)
        used_p2.add(p2.index)
        calls.append(_call(p2, enq.tid, enq.ts, enq.end, True, deq, kernels_of))
    enqueued = {_correlation(e) for e in enqueues}
    orphans = sum(1 for c in dequeues if c not in enqueued)
    if orphans:
        report.warn("Dequeue without its Enqueue (issuing thread unknown, not replayed)", orphans)
    return calls, used_p2


def _direct_calls(phase2: list[TraceEvent], used_p2: set[int], consumer: Any, kernels_of: dict,
                  report: ImportReport) -> list[Call]:
    """The direct calls: phase 2 on the issuing thread itself (not one a queued call used)."""
    calls = []
    for e in phase2:
        if e.index in used_p2:
            continue
        if consumer is not None and e.tid == consumer:
            report.warn("call on the task-queue thread outside any Dequeue (not replayed)", 1,
                        example=e.name)
            continue
        calls.append(_call(e, e.tid, e.ts, e.end, False, None, kernels_of))
    return calls


def _other_device_tasks(view: TraceView, outside: list, placed: set[int], report: ImportReport, issuer: Any) -> Any:
    """The device tasks of no call (launched outside every call, or without a launch link), each noted;
    `issuer` finds the Enqueue of a task-queue thread's launching event (`_issuer`)."""
    launched, seen = [], set(placed)
    for h, k in outside:
        if k.index not in seen:
            seen.add(k.index)
            launched.append((h, k))
    device = collect(view, launched, [k for k in view.device_kernels() if k.index not in seen], issuer)
    for item in device.items:
        how = "launched outside an ACLNN call" if item.host_tid is not None else "without a launch link"
        report.note(f"device task {how}, replayed as a {item.kind} task", 1)
    return device


def _syncs_and_host_apis(acl: list, consumer: Any, report: ImportReport) -> list[Sync]:
    """The synchronisations of the issuing threads; every other AscendCL event is noted (known host-only APIs)
    or warned about (unknown ones), as host time kept between calls."""
    syncs = [Sync(SYNC_APIS[a.api], a.event.tid, a.event.ts, a.event.end) for a in acl
             if a.api in SYNC_APIS and a.event.tid != consumer]
    for a in acl:
        if a.kind in ("phase1", "phase2", "tiling") or a.api == ACLOP_CALL or a.api in SYNC_APIS:
            continue
        if a.api in HOST_ONLY_APIS:
            report.note(f"AscendCL@{a.api} kept as host time between calls", 1)
        elif a.api in LAUNCHING_APIS or a.api.startswith("hcom_"):
            report.note(f"AscendCL@{a.api}: launches the device tasks replayed in its place", 1)
        else:
            report.warn("unknown AscendCL event kept as host time between calls", 1, example=a.api)
    return syncs


def _profile_calls(view: TraceView, calls: list[Call], syncs: list[Sync], consumer: Any, device: Any) -> ProfileCalls:
    """The calls and syncs with the profile's steps, threads in order of appearance, origin and streams (the
    calls' streams first)."""
    steps = sorted((int(m.group(1)), e.ts, e.end) for e in view.events
                   if e.dur > 0 and (m := _STEP_RE.match(e.name)))
    threads: list[Any] = []
    for c in calls:
        if c.thread not in threads:
            threads.append(c.thread)
    for s in syncs:
        if s.thread not in threads:
            threads.append(s.thread)
    host_starts = [c.start_ns for c in calls] + [s.start_ns for s in syncs]
    origin = steps[0][1] if steps else min(host_starts, default=0)
    return ProfileCalls(calls=calls, syncs=syncs, steps=steps, threads=threads, consumer=consumer,
                        origin_ns=min([origin] + host_starts), streams=stream_order(calls, device.streams),
                        device=device)


def stream_order(calls: list[Call], device_streams: set) -> list:
    """The replay's streams: the calls' streams (sorted, so the calls' first stream stays first), then the
    device tasks' other streams and lanes."""
    call_streams = {k.stream for c in calls for k in c.kernels}
    return sorted(call_streams) + sorted(device_streams - call_streams, key=lambda s: (str(s).split("_")[0], str(s)))


def _issuer(dequeues: dict[int, TraceEvent], enqueues: list[TraceEvent], consumer: Any) -> Any:
    """host event -> the Enqueue that queued it (a task-queue thread's event inside a `Dequeue@`), else None:
    a device task launched there belongs to the issuing thread, queued behind its calls, as torch_npu ran it."""
    enq = {_correlation(e): e for e in enqueues}
    deqs = sorted((d for d in dequeues.values() if d.tid == consumer), key=lambda d: (d.ts, d.index))
    starts = [d.ts for d in deqs]

    def issuer(host: TraceEvent) -> TraceEvent | None:
        if consumer is None or host.tid != consumer:
            return None
        i = bisect.bisect_right(starts, host.ts) - 1
        if i < 0 or not _contains(deqs[i], host):
            return None
        return enq.get(_correlation(deqs[i]))
    return issuer


def _owners(links: list, p2_by_thread: dict[Any, list[TraceEvent]]) -> list[tuple[Any, TraceEvent | None]]:
    """Each launch link with the phase-2 event of its thread that holds its host event (None: outside every
    call), in the links' order; one sweep per thread over both lists sorted by start."""
    by_thread: dict[Any, list[int]] = {}
    for i, link in enumerate(links):
        by_thread.setdefault(link.host.tid, []).append(i)
    owner: list[TraceEvent | None] = [None] * len(links)
    for tid, idx in by_thread.items():
        idx.sort(key=lambda i: links[i].host.ts)
        found = innermost_at(p2_by_thread.get(tid, []), [links[i].host.ts for i in idx])
        for i, p2 in zip(idx, found):
            if p2 is not None and _contains(p2, links[i].host):
                owner[i] = p2
    return list(zip(links, owner))


def _correlation(e: TraceEvent) -> int | None:
    """The integer correlation_id pairing an Enqueue with its Dequeue; None when absent or not an integer."""
    value = e.args.get("correlation_id")
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and len(value) < 40:
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _call(p2: TraceEvent, thread: Any, start: int, end: int, queued: bool, deq: TraceEvent | None,
          kernels_of: dict[int, list[Kernel]]) -> Call:
    name = p2.name[len("AscendCL@"):]
    if name == ACLOP_CALL:
        api = deq.name.split("@", 1)[1] if deq is not None and "@" in deq.name else ACLOP_CALL
        kind = "aclop"
    else:
        api, kind = name, "aclnn"
    return Call(api=api, kind=kind, thread=thread, start_ns=start, end_ns=end, phase2=p2, queued=queued,
                kernels=sorted(kernels_of.get(p2.index, []), key=lambda k: k.start_ns))


FRAMEWORK_FLOW = "async_npu"
"""torch_npu's `torch_to_npu` flows: from the framework op on the issuing thread to each kernel it caused."""


def _attach_framework_flows(view: TraceView, calls: list[Call], placed: set[int]) -> None:
    """Kernels no HostToDevice flow reached, placed by their torch_to_npu flow: the call of the flow's thread
    whose host interval holds the flow start, else the thread's next call."""
    kernels = {}
    for k in view.device_kernels():
        if k.index not in placed:
            kernels.setdefault((k.pid, k.tid, k.ts), []).append(k)
    if not kernels:
        return
    by_thread: dict[Any, list[Call]] = {}
    for c in calls:
        by_thread.setdefault(c.thread, []).append(c)
    ends = {t: [c.end_ns for c in v] for t, v in by_thread.items()}
    for f in view.flows:
        if f.cat != FRAMEWORK_FLOW:
            continue
        targets = [k for k in kernels.get((f.end.pid, f.end.tid, f.end.ts), ()) if k.index not in placed]
        cs = by_thread.get(f.start.tid)
        if not targets or not cs:
            continue
        i = bisect.bisect_left(ends[f.start.tid], f.start.ts)  # first call not ended before the flow starts
        if i >= len(cs):
            continue
        for k in targets:
            placed.add(k.index)
            cs[i].kernels.append(Kernel(k.name, view.stream_id(k) or 0, k.ts, k.dur, _task_type(k), task_id=_task_id(k)))
        cs[i].kernels.sort(key=lambda k: k.start_ns)


def _attach_phase1(calls: list[Call], acl: list, report: ImportReport) -> None:
    """Each phase 1 goes to the next call its thread issued (the Enqueue that follows it)."""
    by_thread: dict[Any, list[Call]] = {}
    for c in calls:
        by_thread.setdefault(c.thread, []).append(c)
    starts = {t: [c.start_ns for c in v] for t, v in by_thread.items()}
    for a in acl:
        if a.kind != "phase1":
            continue
        e = a.event
        cs = by_thread.get(e.tid, [])
        i = bisect.bisect_left(starts.get(e.tid, []), e.ts)
        # the same call's phase 1 starts before its Enqueue (queued) or before its phase 2 (direct)
        while i < len(cs) and cs[i].kind != "aclnn":
            i += 1
        if i >= len(cs) or cs[i].phase1 is not None:
            report.warn("GetWorkspaceSize not followed by its call (not replayed)", 1, example=a.api)
            continue
        cs[i].phase1 = e
        cs[i].phase1_api = a.api
        if cs[i].start_ns > e.ts:
            cs[i].start_ns = e.ts


__all__ = ["Call", "Kernel", "Sync", "ProfileCalls", "read_calls", "stream_order", "ACLOP_CALL", "SYNC_APIS"]
