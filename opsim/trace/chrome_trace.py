"""trace.json: the recorder as a Chrome Trace Event file that Perfetto (ui.perfetto.dev) and chrome://tracing open.

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

Times are simulated microseconds from 0, written with nanosecond resolution. Slices on one track nest
strictly: spans are placed in integer nanoseconds and a child never ends after its parent.
"""
from __future__ import annotations

import bisect
import json
from collections import defaultdict
from typing import Any, Iterable, TextIO

OP_CALL = "op_call"
HOST_PID = 1
DEVICE_PID_BASE = 100
HOST_FUNC = "HOST_FUNC"


def _ns(t: float) -> int:
    return int(round(t * 1000.0))


def _us(ns: int) -> float:
    return ns / 1000.0


def _dump(ev: dict[str, Any]) -> str:
    return json.dumps(ev, separators=(",", ":"), default=str)


def _nest(items: list[list]) -> None:
    """Clamp [start_ns, end_ns, ...] items of one track so that they nest strictly (parents sort first)."""
    items.sort(key=lambda x: (x[0], -x[1], x[2]))
    stack: list[int] = []
    for it in items:
        s = it[0]
        while stack and s >= stack[-1]:
            stack.pop()
        if stack and it[1] > stack[-1]:
            it[1] = stack[-1]
        stack.append(it[1])


def thread_tids(sim: Any) -> dict[str, int]:
    """Thread name -> tid (the simulated OS thread id)."""
    return {th.name: th.thread_id for th in sim.threads}


def write_chrome_trace(sim: Any, fh: TextIO, *, process_name: str = "Host") -> int:
    """Write the trace of a finished simulation to `fh`; returns the number of events written."""
    rec = sim.recorder
    tids = thread_tids(sim)
    device = sim.device
    dev_pid = DEVICE_PID_BASE + device.device_id
    events: list[str] = []
    add = events.append

    # --- metadata --------------------------------------------------------------------------------------
    add(_dump({"ph": "M", "pid": HOST_PID, "name": "process_name", "args": {"name": process_name}}))
    add(_dump({"ph": "M", "pid": HOST_PID, "name": "process_sort_index", "args": {"sort_index": 0}}))
    for i, th in enumerate(sim.threads):
        add(_dump({"ph": "M", "pid": HOST_PID, "tid": th.thread_id, "name": "thread_name",
                   "args": {"name": f"{th.name} (tid {th.thread_id})"}}))
        add(_dump({"ph": "M", "pid": HOST_PID, "tid": th.thread_id, "name": "thread_sort_index",
                   "args": {"sort_index": i}}))
    add(_dump({"ph": "M", "pid": dev_pid, "name": "process_name",
               "args": {"name": f"NPU {device.device_id} ({sim.soc.name})"}}))
    add(_dump({"ph": "M", "pid": dev_pid, "name": "process_sort_index", "args": {"sort_index": 1}}))
    for s in device.streams:
        add(_dump({"ph": "M", "pid": dev_pid, "tid": s.stream_id + 1, "name": "thread_name",
                   "args": {"name": f"Stream {s.stream_id}"}}))
        add(_dump({"ph": "M", "pid": dev_pid, "tid": s.stream_id + 1, "name": "thread_sort_index",
                   "args": {"sort_index": s.stream_id}}))

    # --- host slices -------------------------------------------------------------------------------------
    host = rec.records("host")
    per_thread: dict[str, list[list]] = defaultdict(list)
    launch_spans: dict[int, list[tuple[int, int, int]]] = defaultdict(list)  # corr -> (end_ns, start_ns, tid)
    order = 0
    for thread, phase, op, start, dur, corr in zip(host["thread"], host["phase"], host["op"], host["start"],
                                                    host["dur"], host["corr"]):
        s_ns, e_ns = _ns(start), _ns(start + dur)
        if phase == OP_CALL:
            item = [s_ns, e_ns, order, op, "op_call", {"corr": corr}]
        else:
            args = {"op": op}
            if corr >= 0:
                args["corr"] = corr
            item = [s_ns, e_ns, order, phase, "host", args]
            if corr >= 0:
                launch_spans[corr].append((e_ns, s_ns, tids.get(thread, 0)))
        per_thread[thread].append(item)
        order += 1
    inst = rec.records("instant")
    open_steps: dict[tuple[str, int], int] = {}
    other_instants = []
    for t, name, track, args in zip(inst["time"], inst["name"], inst["track"], inst["args"]):
        if name == "step" and isinstance(args, dict) and track in tids:
            key = (track, args.get("step"))
            if args.get("phase") == "begin":
                open_steps[key] = _ns(t)
            elif key in open_steps:
                per_thread[track].append([open_steps.pop(key), _ns(t), -1, f"ProfilerStep#{args.get('step')}",
                                          "step", {"step": args.get("step")}])
            continue
        other_instants.append((t, name, track, args))
    for thread, items in per_thread.items():
        _nest(items)
        tid = tids.get(thread, 0)
        for s_ns, e_ns, _o, name, cat, args in items:
            add(_dump({"ph": "X", "pid": HOST_PID, "tid": tid, "ts": _us(s_ns), "dur": _us(e_ns - s_ns),
                       "name": name, "cat": cat, "args": args}))
    for spans in launch_spans.values():
        spans.sort()

    # --- device slices and flows ----------------------------------------------------------------------------
    dev = rec.records("device")
    per_stream: dict[int, list[list]] = defaultdict(list)
    flows = []
    pool_deltas: dict[str, list[tuple[int, int]]] = defaultdict(list)
    order = 0
    for (stream, kind, units, task_id, op, task_type, block_dim, queued, start, end, corr,
         dev_id) in zip(dev["stream"], dev["unit_kind"], dev["units"], dev["task_id"], dev["op"], dev["task_type"],
                        dev["block_dim"], dev["queued"], dev["start"], dev["end"], dev["corr"], dev["device"]):
        if dev_id != device.device_id:
            continue
        s_ns, e_ns = _ns(start), _ns(end)
        args = {"task_id": task_id, "task_type": task_type, "block_dim": block_dim, "unit_pool": kind,
                "units": units, "queued_us": round(queued, 3), "wait_us": round(start - queued, 3)}
        if corr >= 0:
            args["corr"] = corr
        per_stream[stream].append([s_ns, e_ns, order, op or task_type, task_type, args])
        order += 1
        if kind != "none" and units:
            pool_deltas[kind].append((s_ns, units))
            pool_deltas[kind].append((e_ns, -units))
        if corr >= 0 and task_type != HOST_FUNC:
            spans = launch_spans.get(corr)
            if spans:
                q = _ns(queued)
                i = bisect.bisect_right(spans, (q, 1 << 62, 1 << 62)) - 1
                e_l, s_l, tid = spans[i if i >= 0 else 0]
                flows.append((s_l + (e_l - s_l) // 2, tid, s_ns, stream))
    for stream, items in sorted(per_stream.items()):
        _nest(items)
        for s_ns, e_ns, _o, name, cat, args in items:
            add(_dump({"ph": "X", "pid": dev_pid, "tid": stream + 1, "ts": _us(s_ns), "dur": _us(e_ns - s_ns),
                       "name": name, "cat": cat, "args": args}))
    for fid, (h_ns, tid, d_ns, stream) in enumerate(flows, start=1):
        add(_dump({"ph": "s", "pid": HOST_PID, "tid": tid, "ts": _us(h_ns), "id": fid, "name": "HostToDevice",
                   "cat": "HostToDevice"}))
        add(_dump({"ph": "f", "bp": "e", "pid": dev_pid, "tid": stream + 1, "ts": _us(d_ns), "id": fid,
                   "name": "HostToDevice", "cat": "HostToDevice"}))

    # --- counters ------------------------------------------------------------------------------------------
    mem = rec.records("memory")
    for t, dev_id, in_use in zip(mem["time"], mem["device"], mem["in_use"]):
        if dev_id == device.device_id:
            add(_dump({"ph": "C", "pid": dev_pid, "ts": _us(_ns(t)), "name": "HBM in use", "args": {"bytes": in_use}}))
    for kind, deltas in sorted(pool_deltas.items()):
        deltas.sort()
        busy = 0
        i = 0
        while i < len(deltas):
            t = deltas[i][0]
            while i < len(deltas) and deltas[i][0] == t:
                busy += deltas[i][1]
                i += 1
            add(_dump({"ph": "C", "pid": dev_pid, "ts": _us(t), "name": f"{kind} busy units",
                       "args": {"units": busy}}))
    cnt = rec.records("counter")
    for t, name, value in zip(cnt["time"], cnt["name"], cnt["value"]):
        add(_dump({"ph": "C", "pid": dev_pid, "ts": _us(_ns(t)), "name": name, "args": {"value": value}}))

    # --- instants ------------------------------------------------------------------------------------------
    cache = rec.records("cache")
    for t, thread, c, kind, op, key_hash, detail in zip(cache["time"], cache["thread"], cache["cache"],
                                                        cache["kind"], cache["op"], cache["key_hash"],
                                                        cache["detail"]):
        args = {"op": op}
        if key_hash:
            args["key_hash"] = f"{key_hash:#x}" if isinstance(key_hash, int) else str(key_hash)
        if detail:
            args["detail"] = detail
        ev = {"ph": "i", "s": "t", "ts": _us(_ns(t)), "name": f"{c} cache {kind}", "cat": "cache", "args": args}
        if thread in tids:
            ev.update(pid=HOST_PID, tid=tids[thread])
        else:
            ev.update(pid=dev_pid, tid=0, s="p")
        add(_dump(ev))
    for t, name, track, args in other_instants:
        ev = {"ph": "i", "ts": _us(_ns(t)), "name": name, "cat": "instant",
              "args": args if isinstance(args, dict) else ({} if args is None else {"value": args})}
        if track in tids:
            ev.update(pid=HOST_PID, tid=tids[track], s="t")
        else:
            ev.update(pid=dev_pid, tid=0, s="p")
        add(_dump(ev))

    fh.write('{"displayTimeUnit":"ns","otherData":{"generator":"opsim"},"traceEvents":[\n')
    fh.write(",\n".join(events))
    fh.write("\n]}\n")
    return len(events)


def check_nesting(events: Iterable[dict[str, Any]]) -> list[str]:
    """Problems with `X` slice nesting per (pid, tid) track (empty when every track nests strictly)."""
    tracks: dict[tuple, list[tuple[int, int, str]]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") == "X":
            s = int(round(ev["ts"] * 1000))
            tracks[(ev["pid"], ev.get("tid"))].append((s, s + int(round(ev["dur"] * 1000)), ev.get("name", "")))
    problems = []
    for track, items in tracks.items():
        items.sort(key=lambda x: (x[0], -x[1]))
        stack: list[tuple[int, int, str]] = []
        for s, e, name in items:
            while stack and s >= stack[-1][1]:
                stack.pop()
            if stack and e > stack[-1][1]:
                problems.append(f"{track}: {name} [{s}, {e}] overlaps {stack[-1][2]} "
                                f"[{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((s, e, name))
    return problems


__all__ = ["write_chrome_trace", "check_nesting", "HOST_PID", "DEVICE_PID_BASE"]
