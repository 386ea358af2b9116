"""trace.json: the recorder as a Chrome Trace Event file, for Perfetto (ui.perfetto.dev).

Layout:

- process "Host": one track per simulated thread (tid = the thread's OS id). `X` slices: each ACLNN call's
  `op_call` envelope (named by its API) with the call's host phases nested inside it, the ACL runtime calls
  between ACLNN calls, and `ProfilerStep#N` around each iteration of a thread's top-level loop. Instant
  events mark executor-cache and AI CPU cache outcomes (hit, miss, oneshot, evict) and instants recorded on
  the thread's track (out-of-memory, overflow detections, one-shot tasks).
- one process per device: one track per stream ("Stream N") with an `X` slice per device task, and counter
  tracks: "HBM in use" (bytes), busy units of each unit pool, and every counter the recorder holds (such as
  cached AI CPU tasks).
- `HostToDevice` flow arrows (`s` on the launching host span, `f` on the device task), linked by the
  correlation id every record of one call carries.

Times are simulated microseconds from 0, written with nanosecond resolution (`opsim.trace.timefmt`). Slices on
one track nest strictly, in integer nanoseconds and as a reader adds ``ts + dur`` in doubles: a child never ends
after its parent, siblings never overlap (`opsim.trace.timefmt.nest_durations`).
"""
from __future__ import annotations

import json
from collections import defaultdict
from typing import Any, Iterable, TextIO

from opsim.trace.chrome_device import DeviceColumns, cache_instants, counters, device_slices
from opsim.trace.chrome_host import FlowSources, host_slices
from opsim.trace.chrome_rows import DEVICE_PID_BASE, HOST_PID, TraceWriter
from opsim.trace.json_rows import json_value
from opsim.trace.timefmt import to_ns, ts_float

_ns = to_ns
_us = ts_float
_dump = json_value  # an event formatted by Python


def thread_tids(sim: Any) -> dict[str, int]:
    """Thread name -> tid (the simulated OS thread id)."""
    return {th.name: th.thread_id for th in sim.threads}


def _instant_event(t: float, name: str, track: str, args: Any, tids: dict[str, int], dev_pid: int) -> str:
    """An instant (overflow, OOM, step, ...): on its host thread's track, else process-wide on the device."""
    ev = {"ph": "i", "ts": _us(_ns(t)), "name": name, "cat": "instant",
          "args": args if isinstance(args, dict) else ({} if args is None else {"value": args})}
    if track in tids:
        ev.update(pid=HOST_PID, tid=tids[track], s="t")
    else:
        ev.update(pid=dev_pid, tid=0, s="p")
    return _dump(ev)


def _trace_header(sim: Any) -> str:
    """The opening of the trace object; otherData names the generator and the calibration in use."""
    other: dict[str, Any] = {"generator": "opsim"}
    fitted = getattr(getattr(sim, "cost", None), "fitted", None)
    if fitted is not None:
        other["calibration"] = fitted.name
    return '{"displayTimeUnit":"ns","otherData":' + json.dumps(other, separators=(",", ":")) + ',"traceEvents":[\n'


def _metadata_events(sim: Any, process_name: str) -> list[str]:
    """Process and track names and sort order: the host process with a track per thread, then the device
    process with a track per stream."""
    device = sim.device
    dev_pid = DEVICE_PID_BASE + device.device_id
    out = [_dump({"ph": "M", "pid": HOST_PID, "name": "process_name", "args": {"name": process_name}}),
           _dump({"ph": "M", "pid": HOST_PID, "name": "process_sort_index", "args": {"sort_index": 0}})]
    for i, th in enumerate(sim.threads):
        out.append(_dump({"ph": "M", "pid": HOST_PID, "tid": th.thread_id, "name": "thread_name",
                          "args": {"name": f"{th.name} (tid {th.thread_id})"}}))
        out.append(_dump({"ph": "M", "pid": HOST_PID, "tid": th.thread_id, "name": "thread_sort_index",
                          "args": {"sort_index": i}}))
    out.append(_dump({"ph": "M", "pid": dev_pid, "name": "process_name",
                      "args": {"name": f"NPU {device.device_id} ({sim.soc.name})"}}))
    out.append(_dump({"ph": "M", "pid": dev_pid, "name": "process_sort_index", "args": {"sort_index": 1}}))
    for st in device.streams:
        out.append(_dump({"ph": "M", "pid": dev_pid, "tid": st.stream_id + 1, "name": "thread_name",
                          "args": {"name": f"Stream {st.stream_id}"}}))
        out.append(_dump({"ph": "M", "pid": dev_pid, "tid": st.stream_id + 1, "name": "thread_sort_index",
                          "args": {"sort_index": st.stream_id}}))
    return out


def write_chrome_trace(sim: Any, fh: TextIO, *, process_name: str = "Host") -> int:
    """Write the trace of a finished simulation to `fh`; returns the number of events written.

    Events are rows of `Template`s filled from the recorder's columns (numpy arrays, names as codes) by one
    compiled loop, a block at a time, so a million-call trace never holds a Python object per event; the few
    events of other shapes (metadata, instants, values of unusual types) are formatted by `json_value`. Host
    records are gathered one thread at a time, so only one track's working arrays exist at once."""
    rec = sim.recorder
    rec.compact()
    w = TraceWriter(fh)
    w.text(_trace_header(sim))
    w.events(_metadata_events(sim, process_name))
    tids = thread_tids(sim)
    dev_pid = DEVICE_PID_BASE + sim.device.device_id
    dev = DeviceColumns(rec, sim.device.device_id)
    flows = FlowSources(dev.q_corr, dev.q_ns)
    del dev  # read again after the host tracks: only the flow queries are kept meanwhile
    other_instants = host_slices(rec, tids, w, flows)
    dev = DeviceColumns(rec, sim.device.device_id)
    pools = device_slices(dev, dev_pid, flows, w)
    del dev, flows
    counters(rec, sim.device.device_id, dev_pid, pools, w)
    cache_instants(rec, tids, dev_pid, w)
    w.events([_instant_event(t, name, track, args, tids, dev_pid) for t, name, track, args in other_instants])
    w.text("\n]}\n")
    return w.n


def _span(ev: dict[str, Any]) -> tuple[Any, Any]:
    """(start, end) of an `X` event as a reader computes them: doubles added for numbers (trace.json), exact
    decimals for strings (trace_view.json writes its epoch microseconds as strings)."""
    ts, dur = ev["ts"], ev["dur"]
    if isinstance(ts, str):
        from decimal import Decimal  # lazy: keeps decimal out of importing opsim.trace.chrome_trace
        s = Decimal(ts)
        return s, s + Decimal(dur)
    return float(ts), float(ts) + float(dur)


def check_nesting(events: Iterable[dict[str, Any]]) -> list[str]:
    """Problems with `X` slice nesting per (pid, tid) track, with no tolerance: a slice's end is ``ts + dur``
    as a reader computes it (see `_span`). Empty when every track nests strictly."""
    tracks: dict[tuple, list[tuple[Any, Any, str]]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") == "X":
            s, e = _span(ev)
            tracks[(ev["pid"], ev.get("tid"))].append((s, e, ev.get("name", "")))
    problems = []
    for track, items in tracks.items():
        items.sort(key=lambda x: (x[0], -x[1]))
        stack: list[tuple[Any, Any, str]] = []
        for s, e, name in items:
            while stack and s >= stack[-1][1]:
                stack.pop()
            if stack and e > stack[-1][1]:
                problems.append(f"{track}: {name} [{s}, {e}] overlaps {stack[-1][2]} "
                                f"[{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((s, e, name))
    return problems


__all__ = ["write_chrome_trace", "check_nesting", "HOST_PID", "DEVICE_PID_BASE"]
