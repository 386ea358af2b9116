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
after its parent, siblings never overlap (`SliceNester`).
"""
from __future__ import annotations

import bisect
import json
from collections import defaultdict
from typing import Any, Iterable, TextIO

from opsim.trace.timefmt import SliceNester, json_ts, to_ns, to_ns_array, ts_float

OP_CALL = "op_call"
HOST_PID = 1
DEVICE_PID_BASE = 100
HOST_FUNC = "HOST_FUNC"


_ns = to_ns
_us = ts_float


def _dump(ev: dict[str, Any]) -> str:
    return json.dumps(ev, separators=(",", ":"), default=str)


def _nest(items: list[list]) -> list[float]:
    """Sort [start_ns, end_ns, order, ...] items of one track (parents first) and clamp them so that they nest
    strictly; returns the duration to write for each item, in the new order (see `SliceNester`)."""
    items.sort(key=lambda x: (x[0], -x[1], x[2]))
    place = SliceNester().place
    durs = []
    for it in items:
        it[1], d = place(it[0], it[1])
        durs.append(d)
    return durs


def thread_tids(sim: Any) -> dict[str, int]:
    """Thread name -> tid (the simulated OS thread id)."""
    return {th.name: th.thread_id for th in sim.threads}


def _split_instants(rec: Any, tids: dict[str, int]) -> tuple[dict[str, list[list]], list[tuple]]:
    """Pair "step" begin/end instants of host threads into ProfilerStep#n slices (per track, in end order);
    every other instant is returned as is."""
    inst = rec.records("instant")
    open_steps: dict[tuple[str, Any], int] = {}
    steps: dict[str, list[list]] = {}
    other: list[tuple] = []
    for t, name, track, args in zip(inst["time"], inst["name"], inst["track"], inst["args"]):
        if name == "step" and isinstance(args, dict) and track in tids:
            key = (track, args.get("step"))
            if args.get("phase") == "begin":
                open_steps[key] = _ns(t)
            elif key in open_steps:
                steps.setdefault(track, []).append([open_steps.pop(key), _ns(t), -1,
                                                    f"ProfilerStep#{args.get('step')}", "step",
                                                    {"step": args.get("step")}])
            continue
        other.append((t, name, track, args))
    return steps, other


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

    Large traces are written from the recorder's compact columns (numpy sort keys, events streamed to `fh`
    in batches), so a million-call trace never holds one Python object per event; the bytes are exactly those
    of `write_chrome_trace_reference`, which is used when a column holds values of unusual types."""
    plan = _ColumnarTrace.prepare(sim, process_name)
    if plan is None:
        return write_chrome_trace_reference(sim, fh, process_name=process_name)
    return plan.write(fh)


def write_chrome_trace_reference(sim: Any, fh: TextIO, *, process_name: str = "Host") -> int:
    """The straightforward writer (every event built as a dict, then joined): the definition of the format."""
    rec = sim.recorder
    tids = thread_tids(sim)
    device = sim.device
    dev_pid = DEVICE_PID_BASE + device.device_id
    events: list[str] = []
    add = events.append

    events.extend(_metadata_events(sim, process_name))

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
    steps, other_instants = _split_instants(rec, tids)
    for track, items in steps.items():
        per_thread[track].extend(items)
    for thread, items in per_thread.items():
        durs = _nest(items)
        tid = tids.get(thread, 0)
        for (s_ns, e_ns, _o, name, cat, args), dur in zip(items, durs):
            add(_dump({"ph": "X", "pid": HOST_PID, "tid": tid, "ts": _us(s_ns), "dur": dur,
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
        durs = _nest(items)
        for (s_ns, e_ns, _o, name, cat, args), dur in zip(items, durs):
            add(_dump({"ph": "X", "pid": dev_pid, "tid": stream + 1, "ts": _us(s_ns), "dur": dur,
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
        add(_instant_event(t, name, track, args, tids, dev_pid))

    fh.write(_trace_header(sim))
    fh.write(",\n".join(events))
    fh.write("\n]}\n")
    return len(events)


# ---- the columnar writer -----------------------------------------------------------------------------------

class _Fallback(Exception):
    """A column holds values the columnar writer does not reproduce byte for byte."""


class _Codes(dict):
    """Value -> small int code, assigned on first sight (for string-like columns)."""

    def __missing__(self, key: Any) -> int:
        code = self[key] = len(self)
        return code

    def values_by_code(self) -> list:
        out = [None] * len(self)
        for k, v in self.items():
            out[v] = k
        return out


def _typed(rec: Any, kind: str, name: str, typecode: str, allow_int_as_float: bool = False):
    """Column `name` of `kind` as one numpy array (typecode 'd' float64 or 'q' int64). Raises _Fallback when a
    value is not a plain float / a plain 64-bit int; with `allow_int_as_float`, plain ints up to 2**53 are
    also accepted in a float column (times only ever enter the trace through `_ns`)."""
    import numpy as np
    from array import array

    from opsim.trace.recorder import _compact
    dtype = np.float64 if typecode == "d" else np.int64
    parts = []
    for chunk in rec.iter_chunks(kind):
        col = chunk[name]
        if not len(col):
            continue
        if not isinstance(col, array):
            compact = _compact(col)
            if not isinstance(compact, array):
                if not (allow_int_as_float and set(map(type, col)) <= {int, float}
                        and all(-(1 << 53) <= v <= (1 << 53) for v in col if type(v) is int)):
                    raise _Fallback(name)
                parts.append(np.array(col, dtype=np.float64))
                continue
            col = compact
        if col.typecode == typecode:
            parts.append(np.frombuffer(col, dtype=dtype))
        elif allow_int_as_float and col.typecode == "q":
            ints = np.frombuffer(col, dtype=np.int64)
            if len(ints) and (int(ints.max()) > (1 << 53) or int(ints.min()) < -(1 << 53)):
                raise _Fallback(name)
            parts.append(ints.astype(np.float64))
        else:
            raise _Fallback(name)
    return np.concatenate(parts) if parts else np.empty(0, dtype)


def _coded(rec: Any, kind: str, name: str, codes: _Codes):
    """Column `name` as int32 codes into `codes` (hashable values of any type)."""
    import numpy as np
    parts = []
    get = codes.__getitem__
    for chunk in rec.iter_chunks(kind):
        col = chunk[name]
        try:
            parts.append(np.fromiter(map(get, col), dtype=np.int32, count=len(col)))
        except TypeError:  # unhashable
            raise _Fallback(name) from None
    return np.concatenate(parts) if parts else np.empty(0, np.int32)


_ns_array = to_ns_array


def _nest_arrays(s, e, order):
    """`_nest` over arrays: the permutation that sorts by (start, -end, order), the starts in that order and
    the durations to write."""
    import numpy as np
    perm = np.lexsort((order, -e, s))
    s_sorted = s[perm].tolist()
    place = SliceNester().place
    durs = [place(st, en)[1] for st, en in zip(s_sorted, e[perm].tolist())]
    return perm, s_sorted, durs


class _Out:
    """Events joined by ",\n" and written in batches: `add` is a list append, `step()` writes the batch out
    once it is large (call it once per block of rows), `flush()` writes what is left."""

    __slots__ = ("fh", "buf", "add", "n")

    def __init__(self, fh: TextIO) -> None:
        self.fh = fh
        self.buf: list[str] = []
        self.add = self.buf.append
        self.n = 0

    def step(self) -> None:
        if len(self.buf) >= 8192:
            self.flush()

    def flush(self) -> None:
        buf = self.buf
        if buf:
            self.fh.write((",\n" if self.n else "") + ",\n".join(buf))
            self.n += len(buf)
            buf.clear()


class _ColumnarTrace:
    """The columns write_chrome_trace needs, extracted and checked before anything is written."""

    @classmethod
    def prepare(cls, sim: Any, process_name: str) -> "_ColumnarTrace | None":
        try:
            import numpy  # noqa: F401
        except ImportError:  # pragma: no cover - numpy is a dependency
            return None
        self = cls()
        self.sim, self.process_name = sim, process_name
        rec = sim.recorder
        try:
            self.th_codes, self.ph_codes, self.op_codes = _Codes(), _Codes(), _Codes()
            self.h_thread = _coded(rec, "host", "thread", self.th_codes)
            self.h_phase = _coded(rec, "host", "phase", self.ph_codes)
            self.h_op = _coded(rec, "host", "op", self.op_codes)
            self.h_corr = _typed(rec, "host", "corr", "q")
            start = _typed(rec, "host", "start", "d", allow_int_as_float=True)
            dur = _typed(rec, "host", "dur", "d", allow_int_as_float=True)
            self.h_s = _ns_array(start)
            self.h_e = _ns_array(start + dur)
            del start, dur
            self.d_codes = _Codes()
            for name in ("unit_kind", "op", "task_type"):
                setattr(self, "d_" + name, _coded(rec, "device", name, self.d_codes))
            for name in ("device", "stream", "units", "task_id", "block_dim", "corr"):
                setattr(self, "d_" + name, _typed(rec, "device", name, "q"))
            for name in ("queued", "start", "end"):
                setattr(self, "d_" + name, _typed(rec, "device", name, "d"))
        except _Fallback:
            return None
        for codes in (self.th_codes, self.ph_codes, self.op_codes, self.d_codes):
            if not all(type(v) is str for v in codes):
                return None
        return self

    def write(self, fh: TextIO) -> int:
        import numpy as np
        sim, rec = self.sim, self.sim.recorder
        tids = thread_tids(sim)
        device = sim.device
        dev_pid = DEVICE_PID_BASE + device.device_id
        out = _Out(fh)
        add = out.add
        fh.write(_trace_header(sim))
        jcache: dict[str, str] = {}

        def js(text: str) -> str:
            j = jcache.get(text)
            if j is None:
                j = jcache[text] = json.dumps(text)
            return j

        for ev in _metadata_events(sim, self.process_name):
            add(ev)

        # --- host slices ------------------------------------------------------------------------------------------
        threads = self.th_codes.values_by_code()
        phases = [js(v) for v in self.ph_codes.values_by_code()]
        ops = [js(v) for v in self.op_codes.values_by_code()]
        op_call_code = self.ph_codes.get(OP_CALL, -1)
        n_host = len(self.h_s)
        steps, other_instants = _split_instants(rec, tids)
        # thread order of the reference writer: first appearance in the host records, then step-only tracks
        if n_host:
            codes, first = np.unique(self.h_thread, return_index=True)
            by_first = codes[np.argsort(first, kind="stable")].tolist()
        else:
            by_first = []
        thread_order = [threads[c] for c in by_first]
        rank_of_code = np.zeros(max(len(threads), 1), dtype=np.int64)
        rank_of_code[by_first] = np.arange(len(by_first), dtype=np.int64)
        for track in steps:
            if track not in self.th_codes:
                thread_order.append(track)
        # one sort for every thread: (thread rank, start, -end, record order); each thread is then one run
        rank = rank_of_code[self.h_thread] if n_host else np.empty(0, np.int64)
        perm = np.lexsort((np.arange(n_host, dtype=np.int64), -self.h_e, self.h_s, rank))
        counts = np.bincount(rank, minlength=len(by_first)).tolist() if n_host else []
        del rank
        # launch spans (flows): host spans other than op_call with a correlation id, by (corr, end, start, tid)
        lmask = (self.h_corr >= 0) & (self.h_phase != op_call_code)
        tid_of_code = np.array([tids.get(t, 0) for t in threads] or [0], dtype=np.int64)
        launch = (self.h_corr[lmask], self.h_e[lmask], self.h_s[lmask],
                  tid_of_code[self.h_thread[lmask]] if n_host else np.empty(0, np.int64))
        del lmask
        self.h_thread = None
        batch = 1 << 16
        pos = 0
        for i, thread in enumerate(thread_order):
            tid = tids.get(thread, 0)
            n = counts[i] if i < len(counts) else 0
            extra = sorted(steps.get(thread, []), key=lambda x: (x[0], -x[1]))  # stable: append order on ties
            k = 0
            place = SliceNester().place
            head = f'{{"ph":"X","pid":{HOST_PID},"tid":{tid},"ts":'
            for b0 in range(pos, pos + n, batch) if n else [pos]:
                p = perm[b0:min(b0 + batch, pos + n)]
                rows = zip(self.h_s[p].tolist(), self.h_e[p].tolist(), self.h_phase[p].tolist(),
                           self.h_op[p].tolist(), self.h_corr[p].tolist()) if n else ()
                for s_ns, e_ns, ph, op, corr in rows:
                    while k < len(extra) and (extra[k][0], -extra[k][1]) <= (s_ns, -e_ns):
                        st_s, st_e, _o, name, cat, args = extra[k]
                        k += 1
                        st_e, dur = place(st_s, st_e)
                        add(_dump({"ph": "X", "pid": HOST_PID, "tid": tid, "ts": _us(st_s), "dur": dur,
                                   "name": name, "cat": cat, "args": args}))
                    e_ns, dur = place(s_ns, e_ns)
                    dur_text = repr(dur)
                    if ph == op_call_code:
                        add(f'{head}{json_ts(s_ns)},"dur":{dur_text},"name":{ops[op]},'
                            f'"cat":"op_call","args":{{"corr":{corr}}}}}')
                    elif corr >= 0:
                        add(f'{head}{json_ts(s_ns)},"dur":{dur_text},"name":{phases[ph]},'
                            f'"cat":"host","args":{{"op":{ops[op]},"corr":{corr}}}}}')
                    else:
                        add(f'{head}{json_ts(s_ns)},"dur":{dur_text},"name":{phases[ph]},'
                            f'"cat":"host","args":{{"op":{ops[op]}}}}}')
                out.step()
            for st_s, st_e, _o, name, cat, args in extra[k:]:
                st_e, dur = place(st_s, st_e)
                add(_dump({"ph": "X", "pid": HOST_PID, "tid": tid, "ts": _us(st_s), "dur": dur,
                           "name": name, "cat": cat, "args": args}))
            pos += n
        del perm
        self.h_s = self.h_e = self.h_phase = self.h_op = self.h_corr = None
        l_corr, l_e, l_s, l_tid = launch
        del launch
        perm = np.lexsort((l_tid, l_s, l_e, l_corr))
        l_corr, l_e, l_s, l_tid = l_corr[perm], l_e[perm], l_s[perm], l_tid[perm]
        del perm

        # --- device slices and flows ------------------------------------------------------------------------------
        dnames = self.d_codes.values_by_code()
        keep = np.flatnonzero(self.d_device == device.device_id)
        d_s = _ns_array(self.d_start[keep])
        d_e = _ns_array(self.d_end[keep])
        stream = self.d_stream[keep]
        units = self.d_units[keep]
        kind = self.d_unit_kind[keep]
        ttype = self.d_task_type[keep]
        corr = self.d_corr[keep]
        host_func = self.d_codes.get(HOST_FUNC, -1)
        # flows
        fmask = (corr >= 0) & (ttype != host_func)
        q_corr = corr[fmask]
        q_ns = _ns_array(self.d_queued[keep][fmask])
        lo = np.searchsorted(l_corr, q_corr, "left")
        hi = np.searchsorted(l_corr, q_corr, "right")
        has = hi > lo
        if len(l_e) and len(q_corr) and int(l_e.min()) >= 0 and int(q_ns.min()) >= 0 \
                and int(l_corr.max()) < (1 << 62) // (int(l_e.max()) + 2):
            # one sorted key (corr, end): a query past every end compares like end + 1
            width = int(l_e.max()) + 2
            q_clip = np.minimum(q_ns, width - 1)
            pos = np.searchsorted(l_corr * width + l_e, q_corr * width + q_clip, "right") - 1
        else:
            pos = np.array([lo_i + int(np.searchsorted(l_e[lo_i:hi_i], q, "right")) - 1
                            for lo_i, hi_i, q in zip(lo.tolist(), hi.tolist(), q_ns.tolist())], dtype=np.int64)
        pos = np.where(pos >= lo, pos, lo)
        pos = np.where(has, pos, 0)
        f_h = np.where(has, l_s[pos] + (l_e[pos] - l_s[pos]) // 2, 0) if len(l_e) else np.zeros(len(pos), np.int64)
        f_tid = np.where(has, l_tid[pos], 0) if len(l_e) else np.zeros(len(pos), np.int64)
        f_d = d_s[fmask][has]
        f_stream = stream[fmask][has]
        f_h, f_tid = f_h[has], f_tid[has]
        del lo, hi, pos, has, q_corr, q_ns, l_corr, l_e, l_s, l_tid
        # slices, per stream in stream order
        order_d = np.arange(len(keep), dtype=np.int64)
        task_id = self.d_task_id[keep]
        block_dim = self.d_block_dim[keep]
        queued = self.d_queued[keep]
        start = self.d_start[keep]
        ops_d = self.d_op[keep]
        djs = [js(v) for v in dnames]
        batch = 1 << 16
        for st in np.unique(stream).tolist():
            idx = order_d[stream == st]
            perm, s_sorted, d_sorted = _nest_arrays(d_s[idx], d_e[idx], idx)
            sel_all = idx[perm]
            del idx, perm
            head = f'{{"ph":"X","pid":{dev_pid},"tid":{st + 1},"ts":'
            for b0 in range(0, len(sel_all), batch):
                sel = sel_all[b0:b0 + batch]
                for s_ns, dur, op, tt, tk, bd, kd, un, qd, sd, cr in zip(
                        s_sorted[b0:b0 + batch], d_sorted[b0:b0 + batch], ops_d[sel].tolist(), ttype[sel].tolist(),
                        task_id[sel].tolist(), block_dim[sel].tolist(), kind[sel].tolist(), units[sel].tolist(),
                        queued[sel].tolist(), start[sel].tolist(), corr[sel].tolist()):
                    tt_json = djs[tt]
                    tail = f',"corr":{cr}}}}}' if cr >= 0 else "}}"
                    add(f'{head}{json_ts(s_ns)},"dur":{dur!r},'
                        f'"name":{djs[op] if dnames[op] else tt_json},'
                        f'"cat":{tt_json},"args":{{"task_id":{tk},"task_type":{tt_json},"block_dim":{bd},'
                        f'"unit_pool":{djs[kd]},"units":{un},"queued_us":{round(qd, 3)!r},'
                        f'"wait_us":{round(sd - qd, 3)!r}{tail}')
                out.step()
        fid = 0
        for b0 in range(0, len(f_h), batch):
            for h_ns, tid, d_ns, st in zip(f_h[b0:b0 + batch].tolist(), f_tid[b0:b0 + batch].tolist(),
                                           f_d[b0:b0 + batch].tolist(), f_stream[b0:b0 + batch].tolist()):
                fid += 1
                add(f'{{"ph":"s","pid":{HOST_PID},"tid":{tid},"ts":{json_ts(h_ns)},"id":{fid},'
                    f'"name":"HostToDevice","cat":"HostToDevice"}}')
                add(f'{{"ph":"f","bp":"e","pid":{dev_pid},"tid":{st + 1},"ts":{json_ts(d_ns)},"id":{fid},'
                    f'"name":"HostToDevice","cat":"HostToDevice"}}')
            out.step()

        # --- counters -------------------------------------------------------------------------------------------
        mem_head = f'{{"ph":"C","pid":{dev_pid},"ts":'
        for chunk in rec.iter_chunks("memory"):
            for t, dev_id, in_use in zip(chunk["time"], chunk["device"], chunk["in_use"]):
                if dev_id == device.device_id:
                    if type(in_use) is int:
                        add(f'{mem_head}{_us(_ns(t))!r},"name":"HBM in use","args":{{"bytes":{in_use}}}}}')
                    else:
                        add(_dump({"ph": "C", "pid": dev_pid, "ts": _us(_ns(t)), "name": "HBM in use",
                                   "args": {"bytes": in_use}}))
            out.step()
        pools = sorted({dnames[c] for c in np.unique(kind).tolist()} - {"none"}) if len(kind) else []
        for pool in pools:
            m = (kind == self.d_codes[pool]) & (units != 0)
            t_all = np.concatenate([d_s[m], d_e[m]])
            u_all = np.concatenate([units[m], -units[m]])
            perm = np.lexsort((u_all, t_all))
            t_all, busy = t_all[perm], np.cumsum(u_all[perm])
            last = np.flatnonzero(np.append(t_all[1:] != t_all[:-1], True)) if len(t_all) else t_all
            name = js(f"{pool} busy units")
            t_last, b_last = t_all[last], busy[last]
            for b0 in range(0, len(t_last), batch):
                for t, b in zip(t_last[b0:b0 + batch].tolist(), b_last[b0:b0 + batch].tolist()):
                    add(f'{mem_head}{json_ts(t)},"name":{name},"args":{{"units":{b}}}}}')
                out.step()
        cnt = rec.records("counter")
        for t, name, value in zip(cnt["time"], cnt["name"], cnt["value"]):
            add(_dump({"ph": "C", "pid": dev_pid, "ts": _us(_ns(t)), "name": name, "args": {"value": value}}))

        # --- instants -------------------------------------------------------------------------------------------
        for chunk in rec.iter_chunks("cache"):
            for t, thread, c, kind_, op, key_hash, detail in zip(chunk["time"], chunk["thread"], chunk["cache"],
                                                                 chunk["kind"], chunk["op"], chunk["key_hash"],
                                                                 chunk["detail"]):
                if key_hash or detail or type(op) is not str or type(c) is not str or type(kind_) is not str:
                    args = {"op": op}
                    if key_hash:
                        args["key_hash"] = f"{key_hash:#x}" if isinstance(key_hash, int) else str(key_hash)
                    if detail:
                        args["detail"] = detail
                    ev = {"ph": "i", "s": "t", "ts": _us(_ns(t)), "name": f"{c} cache {kind_}", "cat": "cache",
                          "args": args}
                    if thread in tids:
                        ev.update(pid=HOST_PID, tid=tids[thread])
                    else:
                        ev.update(pid=dev_pid, tid=0, s="p")
                    add(_dump(ev))
                    continue
                tid = tids.get(thread)
                where = '"s":"t"' if tid is not None else '"s":"p"'
                track = f'"pid":{HOST_PID},"tid":{tid}' if tid is not None else f'"pid":{dev_pid},"tid":0'
                add(f'{{"ph":"i",{where},"ts":{_us(_ns(t))!r},"name":{js(f"{c} cache {kind_}")},"cat":"cache",'
                    f'"args":{{"op":{js(op)}}},{track}}}')
            out.step()
        for t, name, track, args in other_instants:
            add(_instant_event(t, name, track, args, tids, dev_pid))
        out.flush()
        fh.write("\n]}\n")
        return out.n


def _span(ev: dict[str, Any]) -> tuple[Any, Any]:
    """(start, end) of an `X` event as a reader computes them: doubles added for numbers (trace.json), exact
    decimals for strings (trace_view.json writes its epoch microseconds as strings)."""
    ts, dur = ev["ts"], ev["dur"]
    if isinstance(ts, str):
        from decimal import Decimal
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


__all__ = ["write_chrome_trace", "write_chrome_trace_reference", "check_nesting", "HOST_PID",
           "DEVICE_PID_BASE"]
