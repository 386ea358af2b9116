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
from typing import TYPE_CHECKING, Any, Iterator, Mapping, MutableMapping

import numpy as np

from opsim.trace.timefmt import to_ns_array, us_text as us_str, us_texts
from opsim.trace.ascend_db_schema import ENUM_TABLES

if TYPE_CHECKING:
    from opsim.trace.ascend_model import OpCalls

__all__ = ["MemoryEvent", "OpMemory", "MemoryEvents", "OpMemories", "no_memory", "memory_profile", "memory_record_rows", "operator_memory_rows",
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


@dataclass
class MemoryEvents:
    """The device's allocs and frees as columns (``alloc``: True for an alloc); `MemoryEvent` objects by index
    or iteration (tests, small runs)."""

    time_ns: np.ndarray
    alloc: np.ndarray
    address: np.ndarray
    size: np.ndarray
    total: np.ndarray

    def __len__(self) -> int:
        return len(self.time_ns)

    def __getitem__(self, i: int) -> MemoryEvent:
        return MemoryEvent(int(self.time_ns[i]), "alloc" if self.alloc[i] else "free", int(self.address[i]),
                           int(self.size[i]), int(self.total[i]))

    def __iter__(self) -> Iterator[MemoryEvent]:
        return (self[i] for i in range(len(self)))


@dataclass
class OpMemories:
    """Each allocation's lifetime as columns: ``name`` a code into ``names``; the release columns are valid
    where ``released``. `OpMemory` objects by index or iteration."""

    name: np.ndarray
    names: list[str]
    size: np.ndarray
    alloc_ns: np.ndarray
    alloc_total: np.ndarray
    release_ns: np.ndarray
    release_total: np.ndarray
    released: np.ndarray

    def __len__(self) -> int:
        return len(self.size)

    def __getitem__(self, i: int) -> OpMemory:
        done = bool(self.released[i])
        return OpMemory(self.names[self.name[i]], int(self.size[i]), int(self.alloc_ns[i]), int(self.alloc_total[i]),
                        int(self.release_ns[i]) if done else None, int(self.release_total[i]) if done else None)

    def __iter__(self) -> Iterator[OpMemory]:
        return (self[i] for i in range(len(self)))

    def releases(self) -> tuple[list[int | None], list[int | None]]:
        """Release time and total of each allocation (None while held)."""
        done = self.released.tolist()
        return ([t if d else None for t, d in zip(self.release_ns.tolist(), done)],
                [t if d else None for t, d in zip(self.release_total.tolist(), done)])


def _ints(values: list[int]) -> np.ndarray:
    """An int64 column, or an object column of Python ints when a value does not fit."""
    try:
        return np.array(values, dtype=np.int64)
    except OverflowError:
        return np.array(values, dtype=object)


def no_memory() -> tuple[MemoryEvents, OpMemories]:
    """A profile without memory events."""
    e = np.empty(0, np.int64)
    return MemoryEvents(e, np.empty(0, bool), e, e, e), OpMemories(e, [], e, e, e, e, e, np.empty(0, bool))


def memory_profile(rec: Any, device_id: int, epoch_ns: int, host: Any, op_calls: OpCalls,
                   since_us: float | None = None) -> tuple[MemoryEvents, OpMemories]:
    """The device's memory events in time order with running totals, and each allocation's lifetime; with
    `since_us` (the profiler's start after a warm-up) only those from then on, the totals still counting the
    memory held when it started."""
    mem = rec.records("memory")
    keep = [i for i, (d, k) in enumerate(zip(mem["device"], mem["kind"]))
            if d == device_id and k in ("alloc", "free")]
    if not keep:
        return no_memory()
    ns = (to_ns_array(np.asarray([mem["time"][i] for i in keep], dtype=np.float64)) + epoch_ns).tolist()
    order = sorted(range(len(keep)), key=lambda j: (ns[j], j))
    workspace = _workspace_names(host, op_calls)
    name_of = _CallAt(op_calls)
    ev: tuple[list, ...] = ([], [], [], [], [])  # time, alloc, address, size, total
    live: dict[int, int] = {}  # address -> its allocation's row
    al: tuple[list, ...] = ([], [], [], [], [], [])  # name, size, alloc time, alloc total, release time, total
    released: list[bool] = []
    codes: dict[str, int] = {}
    total = 0
    for j in order:
        i = keep[j]
        kind, address, size, t = mem["kind"][i], int(mem["address"][i]), int(mem["size"][i]), ns[j]
        total += size if kind == "alloc" else -size
        if since_us is not None and mem["time"][i] < since_us:
            continue
        for col, v in zip(ev, (t, kind == "alloc", address, size, total)):
            col.append(v)
        if kind == "alloc":
            waiting = workspace.get(t)
            name = waiting.pop(0) if waiting else name_of(t)
            live[address] = len(released)
            for col, v in zip(al, (codes.setdefault(name, len(codes)), size, t, total, 0, 0)):
                col.append(v)
            released.append(False)
        elif address in live:
            a = live.pop(address)
            al[4][a], al[5][a], released[a] = t, total, True
    del mem
    events = MemoryEvents(_ints(ev[0]), np.array(ev[1], dtype=bool), *(_ints(c) for c in ev[2:]))
    return events, OpMemories(np.array(al[0], np.int32), list(codes), *(_ints(c) for c in al[1:]),
                              np.array(released, dtype=bool))


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


def memory_record_rows(events: MemoryEvents, device_id: int) -> list[list[str]]:
    """memory_record.csv: the framework allocator's totals after each event."""
    dev = f"NPU:{device_id}"
    times = _times(events.time_ns.tolist())
    return [[FRAMEWORK_COMPONENT, t, mb, mb, mb, "", dev] for t, mb in zip(times, _mbs(events.total.tolist()))]


def operator_memory_rows(allocs: OpMemories, device_id: int) -> list[list[str]]:
    """operator_memory.csv: one row per allocation, in allocation order."""
    dev = f"NPU:{device_id}"
    rows = []
    alloc_ns = allocs.alloc_ns.tolist()
    release_ns, release_total = allocs.releases()
    alloc_ts = _times(alloc_ns)
    release_ts = _times(release_ns)
    durs = _times([None if r is None else r - a for a, r in zip(alloc_ns, release_ns)])
    alloc_mb = _mbs(allocs.alloc_total.tolist())
    release_mb = _mbs(release_total)
    sizes: dict[int, str] = {}
    names = allocs.names
    for name, sz, at, rt, dur, amb, rmb in zip(allocs.name.tolist(), allocs.size.tolist(), alloc_ts, release_ts,
                                                durs, alloc_mb, release_mb):
        size = sizes.get(sz)
        if size is None:
            size = sizes[sz] = repr(sz / 1024)
        rows.append([names[name], size, at, rt, rt, dur, dur, amb, amb, amb, rmb, rmb, rmb, "", dev])
    return rows


def npu_module_mem_rows(events: MemoryEvents, device_id: int) -> list[list[str]]:
    """npu_module_mem.csv: the application module's reserved memory after each event."""
    dev = f"NPU:{device_id}"
    times = _times(events.time_ns.tolist())
    return [[APP_MODULE, t, mb, dev] for t, mb in zip(times, _mbs(events.total.tolist()))]


def memory_strings(p: Any, sid: MutableMapping[str, int]) -> None:
    """Number the memory tables' texts in `sid` (STRING_IDS, a mapping that numbers a text on first look-up) in
    the order `memory_db_rows` uses them."""
    sid[FRAMEWORK_COMPONENT], sid[NPU_MEM_TYPE]
    for name in p.op_memory.names:  # numbered in order of first use
        sid[name]


def memory_db_rows(p: Any, sid: Mapping[str, int]) -> dict[str, Iterator[tuple]]:
    """MEMORY_RECORD, OP_MEMORY, NPU_MEM and NPU_MODULE_MEM rows of a profile (``sid``: STRING_IDS ids, every
    text numbered by `memory_strings`), each drawn as it is inserted. NPU_OP_MEM (GE's own operator memory)
    stays empty: opsim runs no graph engine."""
    dev = p.device_id
    app_module = next(i for i, name in ENUM_TABLES["ENUM_MODULE"].items() if name == APP_MODULE)
    component, app = sid[FRAMEWORK_COMPONENT], sid[NPU_MEM_TYPE]

    def op_memory() -> Iterator[tuple]:
        a = p.op_memory
        ids = [sid[name] for name in a.names]
        release_ns, release_total = a.releases()
        for name, size, alloc_ns, alloc_total, rel_ns, rel_total in zip(
                a.name.tolist(), a.size.tolist(), a.alloc_ns.tolist(), a.alloc_total.tolist(), release_ns,
                release_total):
            dur = None if rel_ns is None else rel_ns - alloc_ns
            yield (ids[name], size, alloc_ns, rel_ns, rel_ns, dur, dur, alloc_total, alloc_total, alloc_total,
                   rel_total, rel_total, rel_total, None, dev)

    def events() -> Iterator[tuple[int, int]]:
        return zip(p.memory_events.time_ns.tolist(), p.memory_events.total.tolist())
    return {
        "MEMORY_RECORD": ((component, t, total, total, total, None, dev) for t, total in events()),
        "OP_MEMORY": op_memory(),
        "NPU_MEM": ((app, 0, total, t, dev) for t, total in events()),
        "NPU_MODULE_MEM": ((app_module, t, total, dev) for t, total in events()),
    }
