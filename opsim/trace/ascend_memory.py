"""The memory side of the profiler output: the simulated allocator's events as torch_npu's memory files.

torch_npu writes the framework allocator's totals over time (memory_record.csv, MEMORY_RECORD), one row per
tensor allocation with its lifetime (operator_memory.csv, OP_MEMORY), and the device's memory per module
(npu_module_mem.csv, NPU_MODULE_MEM, NPU_MEM). opsim's allocator is the device memory behind ``aclrtMalloc``:
every byte allocated is reserved from the device and active, so the allocated, reserved and active totals are
one figure (opsim models no caching allocator in between), and the only module holding memory is the
application's ("APP"). Totals are the running sum of the device's alloc and free events in simulated-time
order (the recorder's own ``in_use`` follows call order, which differs when two threads' clocks interleave).

An allocation is named after the ACLNN call whose ``rt malloc`` span ends at its time (a workspace), else
after the call running at that time on any thread, else ``aclrtMalloc``.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, MutableMapping

import numpy as np

from opsim.trace.ascend_model import OpCalls, us_str
from opsim.trace.timefmt import to_ns_array, us_texts
from opsim.trace.ascend_db_schema import ENUM_TABLES

__all__ = ["MemoryEvent", "OpMemory", "memory_profile", "memory_record_rows", "operator_memory_rows",
           "npu_module_mem_rows", "memory_db_rows", "memory_strings", "MEMORY_RECORD_HEADER", "OPERATOR_MEMORY_HEADER",
           "NPU_MODULE_MEM_HEADER"]

MEMORY_RECORD_HEADER = ("Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                        "Total Active(MB)", "Stream Ptr", "Device Type")
OPERATOR_MEMORY_HEADER = ("Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
                          "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
                          "Allocation Total Reserved(MB)", "Allocation Total Active(MB)",
                          "Release Total Allocated(MB)", "Release Total Reserved(MB)", "Release Total Active(MB)",
                          "Stream Ptr", "Device Type")
NPU_MODULE_MEM_HEADER = ("Component", "Timestamp(us)", "Total Reserved(MB)", "Device")
"""The real files' headers (tests/data/real_profile_schema/text_headers.csv)."""

FRAMEWORK_COMPONENT = "PTA"
"""MEMORY_RECORD's component for the framework allocator (torch_npu's name for itself)."""
APP_MODULE = "APP"
"""The module (ENUM_MODULE) and NPU_MEM type whose memory is the application's."""
NPU_MEM_TYPE = "app"
"""NPU_MEM.type of the application's device memory (the real export's string)."""
_MALLOC_NAME = "aclrtMalloc"


@dataclass(slots=True)
class MemoryEvent:
    """An alloc or free of the device, in epoch ns, with the device's total in use after it (bytes)."""

    time_ns: int
    kind: str
    address: int
    size: int
    total: int


@dataclass(slots=True)
class OpMemory:
    """One allocation's lifetime (release fields None while it is still held at the end of the run)."""

    name: str
    size: int
    alloc_ns: int
    alloc_total: int
    release_ns: int | None = None
    release_total: int | None = None


def memory_profile(rec: Any, device_id: int, epoch_ns: int, host: Any, op_calls: OpCalls,
                   since_us: float | None = None) -> tuple[list[MemoryEvent], list[OpMemory]]:
    """The device's memory events in time order with running totals, and each allocation's lifetime; with
    `since_us` (the profiler's start after a warm-up) only those from then on, the totals still counting the
    memory held when it started."""
    mem = rec.records("memory")
    keep = [i for i, (d, k) in enumerate(zip(mem["device"], mem["kind"]))
            if d == device_id and k in ("alloc", "free")]
    if not keep:
        return [], []
    ns = (to_ns_array(np.asarray([mem["time"][i] for i in keep], dtype=np.float64)) + epoch_ns).tolist()
    order = sorted(range(len(keep)), key=lambda j: (ns[j], j))
    workspace = _workspace_names(host, op_calls)
    name_of = _CallAt(op_calls)
    events: list[MemoryEvent] = []
    live: dict[int, OpMemory] = {}
    allocs: list[OpMemory] = []
    total = 0
    for j in order:
        i = keep[j]
        kind, address, size, t = mem["kind"][i], int(mem["address"][i]), int(mem["size"][i]), ns[j]
        total += size if kind == "alloc" else -size
        if since_us is not None and mem["time"][i] < since_us:
            continue
        events.append(MemoryEvent(t, kind, address, size, total))
        if kind == "alloc":
            waiting = workspace.get(t)
            name = waiting.pop(0) if waiting else name_of(t)
            live[address] = a = OpMemory(name, size, t, total)
            allocs.append(a)
        elif address in live:
            a = live.pop(address)
            a.release_ns, a.release_total = t, total
    return events, allocs


def _workspace_names(host: Any, calls: OpCalls) -> dict[int, list[str]]:
    """The torch names of the calls whose ``rt malloc`` spans end at each time (epoch ns), in record order
    (`host`: the host spans' columns, ascend_host.HostColumns)."""
    out: dict[int, list[str]] = {}
    code = host.code("rt malloc")
    rows = np.flatnonzero(host.phase == code) if code >= 0 else np.empty(0, np.int64)
    call = calls.index_of(host.corr[rows])
    names = calls.torch_names()
    api = calls.api[np.maximum(call, 0)] if len(calls) else call
    for c, a, end in zip(call.tolist(), api.tolist(), host.end_ns[rows].tolist()):
        if c >= 0:
            out.setdefault(end, []).append(names[a])
    return out


class _CallAt:
    """The torch name of a call running at a time: the latest call started before it that still runs then (an
    allocation at a call's very start is the application's, made before the call)."""

    LOOK_BACK = 16
    """Calls of other threads may start in between: this many earlier calls are looked at."""

    def __init__(self, op_calls: OpCalls) -> None:
        self.calls = op_calls
        self.names = op_calls.torch_names()

    def __call__(self, t: int) -> str:
        calls = self.calls
        j = int(np.searchsorted(calls.start_ns, t, "left"))
        for k in range(j - 1, max(0, j - self.LOOK_BACK) - 1, -1):
            if calls.end_ns[k] >= t:
                return self.names[calls.api[k]]
        return _MALLOC_NAME


def _mb(nbytes: int | None) -> str:
    return "" if nbytes is None else repr(nbytes / 1048576)


def _ts(ns: int | None) -> str:
    """A timestamp cell as torch_npu writes it: microseconds with a trailing tab (kept as text by spreadsheets)."""
    return "" if ns is None else us_str(ns) + "\t"


def _times(values: list[int | None]) -> list[str]:
    """`_ts` of a column (None: empty), the numbers formatted at once."""
    known = [v for v in values if v is not None]
    texts = iter(us_texts(np.array(known, dtype=np.int64)) if known and max(map(abs, known)) < 2**62
                 else [us_str(v) for v in known])
    return ["" if v is None else next(texts) + "\t" for v in values]


def _mbs(values: list[int | None]) -> list[str]:
    """`_mb` of a column, each distinct value once."""
    memo: dict[int | None, str] = {}
    out = []
    for v in values:
        t = memo.get(v)
        if t is None:
            t = memo[v] = _mb(v)
        out.append(t)
    return out


def memory_record_rows(events: list[MemoryEvent], device_id: int) -> list[list[str]]:
    """memory_record.csv: the framework allocator's totals after each event."""
    dev = f"NPU:{device_id}"
    times = _times([e.time_ns for e in events])
    return [[FRAMEWORK_COMPONENT, t, mb, mb, mb, "", dev] for t, mb in zip(times, _mbs([e.total for e in events]))]


def operator_memory_rows(allocs: list[OpMemory], device_id: int) -> list[list[str]]:
    """operator_memory.csv: one row per allocation, in allocation order."""
    dev = f"NPU:{device_id}"
    rows = []
    alloc_ts = _times([a.alloc_ns for a in allocs])
    release_ts = _times([a.release_ns for a in allocs])
    durs = _times([None if a.release_ns is None else a.release_ns - a.alloc_ns for a in allocs])
    alloc_mb = _mbs([a.alloc_total for a in allocs])
    release_mb = _mbs([a.release_total for a in allocs])
    sizes: dict[int, str] = {}
    for a, at, rt, dur, amb, rmb in zip(allocs, alloc_ts, release_ts, durs, alloc_mb, release_mb):
        size = sizes.get(a.size)
        if size is None:
            size = sizes[a.size] = repr(a.size / 1024)
        rows.append([a.name, size, at, rt, rt, dur, dur, amb, amb, amb, rmb, rmb, rmb, "", dev])
    return rows


def npu_module_mem_rows(events: list[MemoryEvent], device_id: int) -> list[list[str]]:
    """npu_module_mem.csv: the application module's reserved memory after each event."""
    dev = f"NPU:{device_id}"
    times = _times([e.time_ns for e in events])
    return [[APP_MODULE, t, mb, dev] for t, mb in zip(times, _mbs([e.total for e in events]))]


def memory_strings(p: Any, sid: MutableMapping[str, int]) -> None:
    """Number the memory tables' texts in `sid` (STRING_IDS, a mapping that numbers a text on first look-up) in
    the order `memory_db_rows` uses them."""
    sid[FRAMEWORK_COMPONENT], sid[NPU_MEM_TYPE]
    for a in p.op_memory:
        sid[a.name]


def memory_db_rows(p: Any, sid: Mapping[str, int]) -> dict[str, Iterator[tuple]]:
    """MEMORY_RECORD, OP_MEMORY, NPU_MEM and NPU_MODULE_MEM rows of a profile (``sid``: STRING_IDS ids, every
    text numbered by `memory_strings`), each drawn as it is inserted. NPU_OP_MEM (GE's own operator memory)
    stays empty: opsim runs no graph engine."""
    dev = p.device_id
    app_module = next(i for i, name in ENUM_TABLES["ENUM_MODULE"].items() if name == APP_MODULE)
    component, app = sid[FRAMEWORK_COMPONENT], sid[NPU_MEM_TYPE]

    def op_memory() -> Iterator[tuple]:
        for a in p.op_memory:
            dur = None if a.release_ns is None else a.release_ns - a.alloc_ns
            yield (sid[a.name], a.size, a.alloc_ns, a.release_ns, a.release_ns, dur, dur, a.alloc_total,
                   a.alloc_total, a.alloc_total, a.release_total, a.release_total, a.release_total, None, dev)
    events = p.memory_events
    return {
        "MEMORY_RECORD": ((component, e.time_ns, e.total, e.total, e.total, None, dev) for e in events),
        "OP_MEMORY": op_memory(),
        "NPU_MEM": ((app, 0, e.total, e.time_ns, dev) for e in events),
        "NPU_MODULE_MEM": ((app_module, e.time_ns, e.total, dev) for e in events),
    }
