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

import codecs
import io
import json
from collections import defaultdict
from typing import Any, Iterable, TextIO

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.trace.json_rows import Pieces, Template, json_value
from opsim.trace.timefmt import JSON_US_MAX, nest_durations, round3_ns, to_ns, to_ns_array, ts_float

OP_CALL = "op_call"
HOST_PID = 1
DEVICE_PID_BASE = 100
HOST_FUNC = "HOST_FUNC"


_ns = to_ns
_us = ts_float


_dump = json_value  # an event formatted by Python


def thread_tids(sim: Any) -> dict[str, int]:
    """Thread name -> tid (the simulated OS thread id)."""
    return {th.name: th.thread_id for th in sim.threads}


def _split_instants(rec: Any, tids: dict[str, int]) -> tuple[dict[str, list[tuple]], list[tuple]]:
    """Pair "step" begin/end instants of host threads into ProfilerStep#n slices (per track, in end order, as
    (begin ns, end ns, step)); every other instant is returned as is."""
    open_steps: dict[tuple[str, Any], int] = {}
    steps: dict[str, list[tuple]] = {}
    other: list[tuple] = []
    for inst in rec.iter_chunks("instant"):
        for t, name, track, args in zip(inst["time"], inst["name"], inst["track"], inst["args"]):
            if name == "step" and isinstance(args, dict) and track in tids:
                step = args.get("step")
                if args.get("phase") == "begin":
                    open_steps[(track, step)] = _ns(t)
                elif (track, step) in open_steps:
                    steps.setdefault(track, []).append((open_steps.pop((track, step)), _ns(t), step))
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


BLOCK = 1 << 16
"""Events formatted per compiled call (a block of about 10 MB of text)."""

_HOST_ROW = Template([
    ("row", "row"), '{"ph":"X","pid":1,"tid":', ("int", "tid"), ',"ts":', ("us", "ts"), ',"dur":',
    ("piece", "dur_text", 1), ("skip_nonneg", "dur_text", 1), ("us", "dur"), ',"name":',
    ("skip_neg", "step", 6), '"ProfilerStep#', ("int", "step"), '","cat":"step","args":{"step":', ("int", "step"), "}}",
    ("stop_nonneg", "step"),
    ("piece", "name", 0), ("piece", "mid", 0), ("piece", "corr_key", 0), ("skip_neg", "corr_shown", 1),
    ("int", "corr"), "}}"])
_FLOW_ROWS = Template([
    '{"ph":"s","pid":1,"tid":', ("int", "tid"), ',"ts":', ("us", "host"), ',"id":', ("int", "id"),
    ',"name":"HostToDevice","cat":"HostToDevice"},\n{"ph":"f","bp":"e","pid":', ("int", "pid"), ',"tid":',
    ("int", "stream_tid"), ',"ts":', ("us", "device"), ',"id":', ("int", "id"),
    ',"name":"HostToDevice","cat":"HostToDevice"}'])
_COUNTER_ROW = Template([
    ("row", "row"), '{"ph":"C","pid":', ("int", "pid"), ',"ts":', ("us", "ts"), ',"name":', ("piece", "name", 0),
    ',"args":{', ("piece", "key", 0), ("int", "value"), "}}"])
_CACHE_ROW = Template([
    ("row", "row"), '{"ph":"i",', ("piece", "scope", 0), ',"ts":', ("us", "ts"), ',"name":', ("piece", "name", 0),
    ',"cat":"cache","args":{"op":', ("piece", "op", 0), "},", ("piece", "track", 0), "}"])


def _device_row(pid: int) -> Template:
    return Template([
        ("row", "row"), f'{{"ph":"X","pid":{pid},"tid":', ("int", "tid"), ',"ts":', ("us", "ts"), ',"dur":',
        ("piece", "dur_text", 1), ("skip_nonneg", "dur_text", 1), ("us", "dur"), ',"name":', ("piece", "name", 0),
        ',"cat":', ("piece", "task_type", 0), ',"args":{"task_id":', ("int", "task_id"), ',"task_type":',
        ("piece", "task_type", 0), ',"block_dim":', ("int", "block_dim"), ',"unit_pool":', ("piece", "pool", 0),
        ',"units":', ("int", "units"), ',"queued_us":', ("piece", "queued_text", 1),
        ("skip_nonneg", "queued_text", 1), ("us", "queued"), ',"wait_us":', ("piece", "wait_text", 1),
        ("skip_nonneg", "wait_text", 1), ("us", "wait"), ("piece", "corr_key", 0), ("skip_neg", "corr", 1),
        ("int", "corr"), "}}"])


class _Writer:
    """trace.json's text: the opening, then events joined by ",\\n" (written in blocks), then the closing."""

    def __init__(self, fh: TextIO) -> None:
        self.fh = fh
        # the text is ASCII: a UTF-8 (or ASCII) file takes the bytes as they are, without decoding them
        plain = isinstance(fh, io.TextIOWrapper) and codecs.lookup(fh.encoding).name in ("utf-8", "ascii")
        self.raw = fh.buffer if plain else None
        if self.raw is not None:
            fh.flush()
        self.n = 0
        self._first = True
        self.shared = Pieces()

    def _put(self, data: Any) -> None:
        if self.raw is not None:
            self.raw.write(data)
        else:
            self.fh.write(bytes(data).decode("ascii"))

    def _rows(self, data: Any, n: int) -> None:
        if len(data) and self._first:
            data, self._first = data[2:], False  # the first event has no separator
        self.n += n
        self._put(data)

    def text(self, text: str) -> None:
        self._put(text.encode("ascii"))

    def events(self, texts: list[str]) -> None:
        """Events formatted by Python (metadata, instants, values of unusual types)."""
        if texts:
            self._rows("".join(",\n" + t for t in texts).encode("ascii"), len(texts))

    def block(self, template: Template, n: int, cols: dict[str, Any], own: Pieces | None = None,
              per_row: int = 1) -> None:
        self._rows(template.render(n, cols, self.shared, own), n * per_row)

    def lookup(self, values: list, codes: Any, text: Any = json_value) -> Any:
        """Shared-piece codes of `text(values[c])` for every code in `codes` (-1 where text gives None)."""
        table = np.full(max(len(values), 1), -1, dtype=np.int64)
        for c in np.unique(codes).tolist():
            t = text(values[c])
            if t is not None:
                table[c] = self.shared.code(t)
        return table


def _check_us(*arrays: Any) -> None:
    """Times (ns) that `put_json_us` writes exactly: within JSON_US_MAX (about 11.6 days of simulated time)."""
    for a in arrays:
        if len(a) and (int(a.max()) >= JSON_US_MAX or int(a.min()) <= -JSON_US_MAX):
            raise InvalidArgumentError(f"trace.json: a time beyond {JSON_US_MAX // 10**9} s of simulated time "
                                       "cannot be written exactly; shorten the scenario or write no trace.json "
                                       "(`outputs: {trace: false}` or `--set outputs.trace=false`)")


def _times(rec: Any, kind: str, name: str) -> Any:
    """A time column as float64 (ints are times too)."""
    arr, odd = rec.numeric(kind, name, "d")
    bad = [v for v in odd.values() if type(v) not in (int, float)]
    if bad:
        raise InvalidArgumentError(f"recorder {kind} records: {name} {bad[0]!r} is not a number of microseconds")
    return arr


def _dur_texts(own: Pieces, starts: Any, ends: Any, durs: Any) -> tuple[Any, Any]:
    """Durations as nanoseconds when the written double is the plain quotient (its text is then exact), else
    as the text of the double (a piece of `own`)."""
    diff = ends - starts
    alt = np.full(len(durs), -1, dtype=np.int64)
    inexact = np.flatnonzero(durs != diff / 1000.0)
    if len(inexact):  # few distinct values: each is formatted once
        distinct, which = np.unique(durs[inexact], return_inverse=True)
        alt[inexact] = own.add(list(map(repr, distinct.tolist())))[which]
    return diff, alt


def _rounded_texts(own: Pieces, values: Any) -> tuple[Any, Any]:
    """``round(v, 3)`` as thousandths, or as its text (a piece of `own`) where that is not certain."""
    k, ok = round3_ns(values)
    alt = np.full(len(values), -1, dtype=np.int64)
    doubt = np.flatnonzero(~ok)
    alt[doubt] = own.add([repr(round(v, 3)) for v in values[doubt].tolist()])
    return k, alt


def write_chrome_trace(sim: Any, fh: TextIO, *, process_name: str = "Host") -> int:
    """Write the trace of a finished simulation to `fh`; returns the number of events written.

    Events are rows of `Template`s filled from the recorder's columns (numpy arrays, names as codes) by one
    compiled loop, a block at a time, so a million-call trace never holds a Python object per event; the few
    events of other shapes (metadata, instants, values of unusual types) are formatted by `json_value`. Host
    records are gathered one thread at a time, so only one track's working arrays exist at once."""
    rec = sim.recorder
    rec.compact()
    w = _Writer(fh)
    w.text(_trace_header(sim))
    w.events(_metadata_events(sim, process_name))
    tids = thread_tids(sim)
    dev_pid = DEVICE_PID_BASE + sim.device.device_id
    dev = _DeviceColumns(rec, sim.device.device_id)
    flows = _FlowSources(dev.q_corr, dev.q_ns)
    del dev  # read again after the host tracks: only the flow queries are kept meanwhile
    other_instants = _host_slices(rec, tids, w, flows)
    dev = _DeviceColumns(rec, sim.device.device_id)
    pools = _device_slices(dev, dev_pid, flows, w)
    del dev, flows
    _counters(rec, sim.device.device_id, dev_pid, pools, w)
    _cache_instants(rec, tids, dev_pid, w)
    w.events([_instant_event(t, name, track, args, tids, dev_pid) for t, name, track, args in other_instants])
    w.text("\n]}\n")
    return w.n


def _track_order(s: Any, e: Any, rid: Any) -> Any:
    """The permutation that sorts a track's slices by (start, -end, record order), for `rid` ascending: a stable
    sort by start (records come nearly in start order), then the few runs of equal starts by (-end, rid)."""
    perm = np.argsort(s, kind="stable")
    ss = s[perm]
    tied = np.zeros(len(perm), dtype=bool)
    same = np.flatnonzero(ss[1:] == ss[:-1])
    tied[same] = True
    tied[same + 1] = True
    at = np.flatnonzero(tied)
    if len(at):
        sub = perm[at]
        perm[at] = sub[np.lexsort((rid[sub], -e[sub], s[sub]))]
    return perm


class _FlowSources:
    """The launch span each flow arrow starts from: for a device task queued at q with correlation id c, the
    last host span of c (by end, start, tid) ending by q, else the first span of c. Fed one thread's launch
    spans at a time."""

    def __init__(self, q_corr: Any, q_ns: Any) -> None:
        self.q_corr, self.q_ns = q_corr.astype(np.int64), q_ns
        n = len(q_corr)
        self.le = [np.full(n, -1, dtype=np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)]  # e, s, tid
        self.first = [np.full(n, -1, dtype=np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)]
        self.has_le = np.zeros(n, dtype=bool)
        self.has_any = np.zeros(n, dtype=bool)

    @staticmethod
    def _after(a: list, b: list) -> Any:
        """Where (e, s, tid) of `a` sorts after `b`'s."""
        return (a[0] > b[0]) | ((a[0] == b[0]) & ((a[1] > b[1]) | ((a[1] == b[1]) & (a[2] > b[2]))))

    def feed(self, corr: Any, e: Any, s: Any, tid: int) -> None:
        """One thread's launch spans (correlation ids, ends, starts; int64)."""
        if not len(corr) or not len(self.q_corr):
            return
        q_corr, q_ns = self.q_corr, self.q_ns
        if int(e.min()) >= 0 and int(q_ns.min()) >= 0 and int(corr.min()) >= 0 \
                and max(int(corr.max()), int(q_corr.max())) + 1 < (1 << 62) // (int(e.max()) + 2):
            # one sorted key (corr, end): a query past every end compares like end + 1
            width = int(e.max()) + 2
            key = corr * width
            key += e
            perm = np.lexsort((s, key))
            key = key[perm]
            s = s[perm]
            del perm
            lo = np.searchsorted(key, q_corr * width, "left")
            hi = np.searchsorted(key, (q_corr + 1) * width, "left")
            pos = np.searchsorted(key, q_corr * width + np.minimum(q_ns, width - 1), "right") - 1
            e = key  # the end of a span: its key modulo the width
            e_at = lambda i: e[i] % width  # noqa: E731
        else:
            perm = np.lexsort((s, e, corr))
            corr, e, s = corr[perm], e[perm], s[perm]
            del perm
            lo = np.searchsorted(corr, q_corr, "left")
            hi = np.searchsorted(corr, q_corr, "right")
            pos = np.array([lo_i + int(np.searchsorted(e[lo_i:hi_i], q, "right")) - 1
                            for lo_i, hi_i, q in zip(lo.tolist(), hi.tolist(), q_ns.tolist())], dtype=np.int64)
            e_at = e.__getitem__
        has = hi > lo
        le = has & (pos >= lo)
        pos = np.where(le, pos, 0)
        lo = np.where(has, lo, 0)
        tids = np.full(len(q_corr), tid, dtype=np.int64)
        cand = [e_at(pos), s[pos], tids]
        better = le & (~self.has_le | self._after(cand, self.le))
        for mine, theirs in zip(self.le, cand):
            mine[better] = theirs[better]
        self.has_le |= le
        cand = [e_at(lo), s[lo], tids]
        better = has & (~self.has_any | self._after(self.first, cand))
        for mine, theirs in zip(self.first, cand):
            mine[better] = theirs[better]
        self.has_any |= has

    def result(self) -> tuple[Any, Any, Any]:
        """(has a source, the middle of the source span, its tid) per query."""
        src = [np.where(self.has_le, a, b) for a, b in zip(self.le, self.first)]
        return self.has_any, src[1] + (src[0] - src[1]) // 2, src[2]


def _host_event(tid: int, s_ns: int, dur: float, phase: Any, op: Any, corr: Any) -> str:
    """A host slice formatted by Python (a correlation id of an unusual type)."""
    if phase == OP_CALL:
        name, cat, args = op, "op_call", {"corr": corr}
    else:
        name, cat, args = phase, "host", {"op": op}
        if corr >= 0:
            args["corr"] = corr
    return _dump({"ph": "X", "pid": HOST_PID, "tid": tid, "ts": _us(s_ns), "dur": dur, "name": name, "cat": cat,
                  "args": args})


def _host_slices(rec: Any, tids: dict[str, int], w: _Writer, flows: _FlowSources) -> list:
    """Every host thread's track (its spans and ProfilerStep slices, nested), feeding each thread's launch
    spans to `flows`; returns the instants that are not steps."""
    names = ("thread", "phase", "op")
    chunks = list(zip(*(rec.coded_chunks("host", c) for c in names),
                      *(rec.numeric_chunks("host", c, t) for c, t in (("start", "d"), ("dur", "d"), ("corr", "q")))))
    values = rec.code_values()
    odd_corr: dict[int, Any] = {}
    for *_codes, (_s, odd_s), (_d, odd_d), (_c, odd_c) in chunks:
        bad = [v for v in (*odd_s.values(), *odd_d.values()) if type(v) not in (int, float)]
        if bad:
            raise InvalidArgumentError(f"recorder host records: {bad[0]!r} is not a number of microseconds")
        odd_corr.update(odd_c)
    steps, other_instants = _split_instants(rec, tids)
    op_call = next((c for c, v in enumerate(values) if type(v) is str and v == OP_CALL), -1)
    # thread order: first appearance in the host records, then tracks that only have steps
    first: dict[int, int] = {}
    base = 0
    for th_c, *_rest in chunks:
        for c in np.flatnonzero(np.bincount(th_c)).tolist() if len(th_c) else ():
            first.setdefault(c, base + int(np.argmax(th_c == c)))
        base += len(th_c)
    order = [(c, values[c]) for c in sorted(first, key=first.get)]
    seen = {v for _c, v in order}
    order += [(-1, track) for track in steps if track not in seen]
    shared = w.shared
    every = np.arange(len(values), dtype=np.int64)
    op_name = w.lookup(values, every)
    host_mid = w.lookup(values, every, lambda v: ',"cat":"host","args":{"op":' + json_value(v))
    call_mid = shared.code(',"cat":"op_call","args":{"corr":')
    corr_key = shared.code(',"corr":')
    odd_rows = np.array(sorted(odd_corr), dtype=np.int64)
    for code, thread in order:
        tid = tids.get(thread, 0)
        items = steps.get(thread, [])
        n_steps = len(items)
        sels = [np.flatnonzero(th_c == code) if code >= 0 else np.empty(0, np.int64)
                for th_c, *_rest in chunks]
        n_rows = n_steps + sum(map(len, sels))
        # the track's columns, filled in place (steps first: they come first on a tie)
        s = np.empty(n_rows, np.int64)
        e = np.empty(n_rows, np.int64)
        ph = np.zeros(n_rows, np.int32)
        op = np.zeros(n_rows, np.int32)
        corr = np.full(n_rows, -1, np.int64)
        rid = np.empty(n_rows, np.int64)
        s[:n_steps] = [it[0] for it in items]
        e[:n_steps] = [it[1] for it in items]
        rid[:n_steps] = np.arange(n_steps, dtype=np.int64) - n_steps
        at, base = n_steps, 0
        for sel, (th_c, ph_c, op_c, (st_c, _), (du_c, _), (co_c, _)) in zip(sels, chunks):
            k = len(sel)
            if k:
                st = st_c[sel].astype(np.float64)
                end = du_c[sel].astype(np.float64)
                np.add(st, end, out=end)
                s[at:at + k] = to_ns_array(st)
                e[at:at + k] = to_ns_array(end)
                del st, end
                ph[at:at + k] = ph_c[sel]
                op[at:at + k] = op_c[sel]
                corr[at:at + k] = co_c[sel]
                rid[at:at + k] = sel + base
                at += k
            base += len(th_c)
        del sels
        _check_us(s, e)
        launch = (corr >= 0) & (ph != op_call) & (rid >= 0)
        if len(odd_rows):
            launch &= ~np.isin(rid, odd_rows)
        flows.feed(corr[launch], e[launch], s[launch], tid)
        del launch
        perm = _track_order(s, e, rid)
        s = s[perm]
        e = e[perm]
        ph = ph[perm]
        op = op[perm]
        corr = corr[perm]
        rid = rid[perm]
        del perm
        is_call = ph == op_call
        e, durs = nest_durations(s, e)
        step_no = np.array([n if type(n) is int and 0 <= n < (1 << 63) else -1 for _s, _e, n in items] or [-1],
                           dtype=np.int64)
        for b0 in range(0, len(s), BLOCK):
            b1 = min(b0 + BLOCK, len(s))
            n = b1 - b0
            bs, be, bd, brid = s[b0:b1], e[b0:b1], durs[b0:b1], rid[b0:b1]
            own = Pieces()
            row = np.full(n, -1, dtype=np.int64)
            step = np.full(n, -1, dtype=np.int64)
            at = np.flatnonzero(brid < 0)
            which = brid[at] + n_steps
            step[at] = step_no[which]
            for k in at[step_no[which] < 0].tolist():  # a step number that is not a plain int: Python's text
                st_s, _st_e, n_step = items[int(brid[k]) + n_steps]
                row[k] = own.code(_dump({"ph": "X", "pid": HOST_PID, "tid": tid, "ts": _us(st_s),
                                             "dur": float(bd[k]), "name": f"ProfilerStep#{n_step}", "cat": "step",
                                             "args": {"step": n_step}}))
            if len(odd_rows):
                for k in np.flatnonzero(np.isin(brid, odd_rows)).tolist():
                    row[k] = own.code(_host_event(tid, int(bs[k]), float(bd[k]), values[ph[b0 + k]],
                                                  values[op[b0 + k]], odd_corr[int(brid[k])]))
            dur_ns, dur_text = _dur_texts(own, bs, be, bd)
            call, b_op, b_corr = is_call[b0:b1], op[b0:b1], corr[b0:b1]
            w.block(_HOST_ROW, n, {
                "row": row, "step": step, "tid": np.full(n, tid, dtype=np.int64), "ts": bs, "dur_text": dur_text,
                "dur": dur_ns, "name": np.where(call, op_name[b_op], op_name[ph[b0:b1]]),
                "mid": np.where(call, call_mid, host_mid[b_op]),
                "corr_key": np.where(~call & (b_corr >= 0), corr_key, -1),
                "corr_shown": np.where(call | (b_corr >= 0), 0, -1), "corr": b_corr}, own)
        # before the next track's arrays exist (the block slices are views of these)
        del s, e, ph, op, corr, rid, durs, is_call
        bs = be = bd = brid = call = b_op = b_corr = None
    return other_instants


def _device_event(dev_pid: int, s_ns: int, dur: float, v: dict[str, Any]) -> str:
    """A device slice formatted by Python (a value of an unusual type)."""
    args = {"task_id": v["task_id"], "task_type": v["task_type"], "block_dim": v["block_dim"],
            "unit_pool": v["unit_kind"], "units": v["units"], "queued_us": round(v["queued"], 3),
            "wait_us": round(v["start"] - v["queued"], 3)}
    if v["corr"] >= 0:
        args["corr"] = v["corr"]
    return _dump({"ph": "X", "pid": dev_pid, "tid": v["stream"] + 1, "ts": _us(s_ns), "dur": dur,
                  "name": v["op"] or v["task_type"], "cat": v["task_type"], "args": args})


class _DeviceColumns:
    """The device tasks of one device as arrays (in record order), and the flow queries: the correlation id
    and queued time of every task an arrow points to."""

    def __init__(self, rec: Any, device_id: int) -> None:
        ints = {name: rec.numeric("device", name, "q") for name in
                ("device", "stream", "units", "task_id", "block_dim", "corr")}
        floats = {name: rec.numeric("device", name, "d") for name in ("queued", "start", "end")}
        for name in ("start", "end"):
            bad = [v for v in floats[name][1].values() if type(v) not in (int, float)]
            if bad:
                raise InvalidArgumentError(f"recorder device records: {name} {bad[0]!r} is not a number of "
                                           "microseconds")
        kind_all, self.values = rec.coded("device", "unit_kind")
        keep = np.flatnonzero(ints["device"][0] == device_id)
        odd = set()
        for _arr, o in [*ints.values(), *floats.values()]:
            odd.update(o)
        self.odd_rows: dict[int, dict[str, Any]] = {}
        if odd:
            recs = rec.records("device")
            self.odd_rows = {i: {c: recs[c][i] for c in recs} for i in odd}
            keep = np.flatnonzero(np.array([d == device_id for d in recs["device"]], dtype=bool))
        self.keep = keep
        self.kind = kind_all[keep]
        self.ttype = rec.coded("device", "task_type")[0][keep]
        self.op = rec.coded("device", "op")[0][keep]
        self.stream, self.units, self.corr = (ints[n][0][keep] for n in ("stream", "units", "corr"))
        self.task_id, self.block_dim = ints["task_id"][0][keep], ints["block_dim"][0][keep]
        self.queued, self.start = floats["queued"][0][keep], floats["start"][0][keep]
        self.s = to_ns_array(self.start)
        self.e = to_ns_array(floats["end"][0][keep])
        _check_us(self.s, self.e)
        host_func = next((c for c, v in enumerate(self.values) if type(v) is str and v == HOST_FUNC), -1)
        fmask = self.corr >= 0
        if host_func >= 0:
            fmask &= self.ttype != host_func
        if self.odd_rows:
            fmask &= ~np.isin(keep, list(self.odd_rows))
        self.fmask = fmask
        self.q_corr = self.corr[fmask]
        self.q_ns = to_ns_array(self.queued[fmask])


def _device_slices(dev: _DeviceColumns, dev_pid: int, flows: _FlowSources, w: _Writer) -> dict[str, tuple]:
    """The device's stream tracks (nested per stream), then the flow arrows from each task's launch span;
    returns, per unit pool, the busy-unit steps (times, units in use) for the counters."""
    values, keep, stream, units, kind, corr = dev.values, dev.keep, dev.stream, dev.units, dev.kind, dev.corr
    d_s, d_e = dev.s, dev.e
    tt_text = w.lookup(values, dev.ttype)[dev.ttype]
    no_op = np.array([not v for v in values] or [False])
    name = np.where(no_op[dev.op], tt_text, w.lookup(values, dev.op)[dev.op])  # a task without an op: its type
    pool_text = w.lookup(values, kind)[kind]
    corr_key = w.shared.code(',"corr":')
    template = _device_row(dev_pid)
    rows = np.arange(len(keep), dtype=np.int64)
    odd = np.array(sorted(dev.odd_rows), dtype=np.int64)
    for st in np.unique(stream).tolist():
        idx = rows[stream == st]
        perm = _track_order(d_s[idx], d_e[idx], idx)
        idx = idx[perm]
        del perm
        s_sorted, (e_sorted, durs) = d_s[idx], nest_durations(d_s[idx], d_e[idx])
        for b0 in range(0, len(idx), BLOCK):
            sel = idx[b0:b0 + BLOCK]
            n = len(sel)
            own = Pieces()
            bs, be, bd = s_sorted[b0:b0 + BLOCK], e_sorted[b0:b0 + BLOCK], durs[b0:b0 + BLOCK]
            row = np.full(n, -1, dtype=np.int64)
            if len(odd):
                for k in np.flatnonzero(np.isin(keep[sel], odd)).tolist():
                    row[k] = own.code(_device_event(dev_pid, int(bs[k]), float(bd[k]),
                                                    dev.odd_rows[int(keep[sel[k]])]))
            dur_ns, dur_text = _dur_texts(own, bs, be, bd)
            q, s = dev.queued[sel], dev.start[sel]
            q_k, q_text = _rounded_texts(own, q)
            w_k, w_text = _rounded_texts(own, s - q)
            c = corr[sel]
            w.block(template, n, {
                "row": row, "tid": stream[sel] + 1, "ts": bs, "dur_text": dur_text, "dur": dur_ns, "name": name[sel],
                "task_type": tt_text[sel], "task_id": dev.task_id[sel], "block_dim": dev.block_dim[sel],
                "pool": pool_text[sel], "units": units[sel], "queued_text": q_text, "queued": q_k,
                "wait_text": w_text, "wait": w_k, "corr_key": np.where(c >= 0, corr_key, -1), "corr": c}, own)
    has, f_h, f_tid = flows.result()
    f_h, f_tid = f_h[has], f_tid[has]
    f_d, f_stream = d_s[dev.fmask][has], stream[dev.fmask][has]
    for b0 in range(0, len(f_h), BLOCK):
        n = len(f_h[b0:b0 + BLOCK])
        w.block(_FLOW_ROWS, n, {"tid": f_tid[b0:b0 + BLOCK], "host": f_h[b0:b0 + BLOCK],
                                "id": np.arange(b0 + 1, b0 + n + 1, dtype=np.int64),
                                "pid": np.full(n, dev_pid, dtype=np.int64),
                                "stream_tid": f_stream[b0:b0 + BLOCK] + 1, "device": f_d[b0:b0 + BLOCK]},
                per_row=2)
    # busy units per pool: +units at each start, -units at each end
    pools = {}
    for code in np.unique(kind).tolist():
        pool = values[code]
        if pool == "none":
            continue
        m = (kind == code) & (units != 0)
        t_all = np.concatenate([d_s[m], d_e[m]])
        u_all = np.concatenate([units[m], -units[m]])
        perm = np.lexsort((u_all, t_all))
        t_all, busy = t_all[perm], np.cumsum(u_all[perm])
        last = np.flatnonzero(np.append(t_all[1:] != t_all[:-1], True)) if len(t_all) else t_all
        pools[pool] = (t_all[last], busy[last])
    return pools


def _counters(rec: Any, device_id: int, dev_pid: int, pools: dict[str, tuple], w: _Writer) -> None:
    """HBM in use, busy units of each pool, then every recorded counter."""
    t = to_ns_array(_times(rec, "memory", "time"))
    dev, odd_dev = rec.numeric("memory", "device", "q")
    in_use, odd_use = rec.numeric("memory", "in_use", "q")
    _check_us(t)
    keep = dev == device_id
    if odd_dev or odd_use:
        recs = rec.records("memory")
        keep = np.array([d == device_id for d in recs["device"]], dtype=bool)
    idx = np.flatnonzero(keep)
    hbm = w.shared.code('"HBM in use"')
    key = w.shared.code('"bytes":')
    for b0 in range(0, len(idx), BLOCK):
        sel = idx[b0:b0 + BLOCK]
        n = len(sel)
        own = Pieces()
        row = np.full(n, -1, dtype=np.int64)
        if odd_use:
            for k in np.flatnonzero(np.isin(sel, list(odd_use))).tolist():
                i = int(sel[k])
                row[k] = own.code(_dump({"ph": "C", "pid": dev_pid, "ts": _us(int(t[i])), "name": "HBM in use",
                                         "args": {"bytes": odd_use[i]}}))
        w.block(_COUNTER_ROW, n, {"row": row, "pid": np.full(n, dev_pid, dtype=np.int64), "ts": t[sel],
                                  "name": np.full(n, hbm, dtype=np.int64), "key": np.full(n, key, dtype=np.int64),
                                  "value": in_use[sel]}, own)
    key = w.shared.code('"units":')
    for pool, (times, busy) in sorted(pools.items()):
        name = w.shared.code(json_value(f"{pool} busy units"))
        for b0 in range(0, len(times), BLOCK):
            n = len(times[b0:b0 + BLOCK])
            w.block(_COUNTER_ROW, n, {"row": np.full(n, -1, dtype=np.int64), "pid": np.full(n, dev_pid, dtype=np.int64),
                                      "ts": times[b0:b0 + BLOCK], "name": np.full(n, name, dtype=np.int64),
                                      "key": np.full(n, key, dtype=np.int64), "value": busy[b0:b0 + BLOCK]})
    for chunk in rec.iter_chunks("counter"):
        w.events([_dump({"ph": "C", "pid": dev_pid, "ts": _us(_ns(t)), "name": name, "args": {"value": value}})
                  for t, name, value in zip(chunk["time"], chunk["name"], chunk["value"])])


def _cache_event(t_ns: int, thread: Any, c: Any, kind: Any, op: Any, key_hash: Any, detail: Any,
                 tids: dict[str, int], dev_pid: int) -> str:
    """A cache outcome formatted by Python (a key hash, a detail, or names that are not strings)."""
    args = {"op": op}
    if key_hash:
        args["key_hash"] = f"{key_hash:#x}" if isinstance(key_hash, int) else str(key_hash)
    if detail:
        args["detail"] = detail
    ev = {"ph": "i", "s": "t", "ts": _us(t_ns), "name": f"{c} cache {kind}", "cat": "cache", "args": args}
    if thread in tids:
        ev.update(pid=HOST_PID, tid=tids[thread])
    else:
        ev.update(pid=dev_pid, tid=0, s="p")
    return _dump(ev)


def _cache_instants(rec: Any, tids: dict[str, int], dev_pid: int, w: _Writer) -> None:
    """Cache outcomes: on the thread's track, else process-wide on the device."""
    t = to_ns_array(_times(rec, "cache", "time"))
    _check_us(t)
    th, values = rec.coded("cache", "thread")
    cache, _ = rec.coded("cache", "cache")
    kind, _ = rec.coded("cache", "kind")
    op, _ = rec.coded("cache", "op")
    detail, _ = rec.coded("cache", "detail")
    key_hash, odd_hash = rec.numeric("cache", "key_hash", "q")
    plain = np.array([type(v) is str for v in values] or [False])
    truthy = np.array([bool(v) for v in values] or [False])
    special = (key_hash != 0) | truthy[detail] | ~plain[cache] | ~plain[kind] | ~plain[op]
    if odd_hash:
        special[list(odd_hash)] = True
    on_thread = np.array([v in tids for v in values] or [False])
    scope = np.where(on_thread[th], w.shared.code('"s":"t"'), w.shared.code('"s":"p"'))
    track = w.lookup(values, th, lambda v: (f'"pid":{HOST_PID},"tid":{tids[v]}' if v in tids
                                            else f'"pid":{dev_pid},"tid":0'))[th]
    n_kinds = len(values) + 1
    pair = cache.astype(np.int64) * n_kinds + kind
    name = np.full(len(pair), -1, dtype=np.int64)
    for p in np.unique(pair).tolist():
        name[pair == p] = w.shared.code(json_value(f"{values[p // n_kinds]} cache {values[p % n_kinds]}"))
    op_text = w.lookup(values, op)[op]
    for b0 in range(0, len(t), BLOCK):
        b1 = min(b0 + BLOCK, len(t))
        n = b1 - b0
        own = Pieces()
        row = np.full(n, -1, dtype=np.int64)
        for k in np.flatnonzero(special[b0:b1]).tolist():
            i = b0 + k
            row[k] = own.code(_cache_event(int(t[i]), values[th[i]], values[cache[i]],
                                           values[kind[i]], values[op[i]], odd_hash.get(i, int(key_hash[i])),
                                           values[detail[i]], tids, dev_pid))
        w.block(_CACHE_ROW, n, {"row": row, "scope": scope[b0:b1], "ts": t[b0:b1], "name": name[b0:b1],
                                "op": op_text[b0:b1], "track": track[b0:b1]}, own)


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


__all__ = ["write_chrome_trace", "check_nesting", "HOST_PID", "DEVICE_PID_BASE"]
