"""trace.json's host tracks: each thread's spans and ProfilerStep slices, and the sources of the flow arrows."""
from __future__ import annotations

from typing import Any

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.trace.chrome_rows import (BLOCK, HOST_PID, OP_CALL, TraceWriter, check_us, dur_texts,
                                     track_order)
from opsim.trace.json_rows import Pieces, Template, json_value
from opsim.trace.timefmt import nest_durations, to_ns, to_ns_array, ts_float

_ns = to_ns
_us = ts_float
_dump = json_value  # an event formatted by Python

_HOST_ROW = Template([
    ("row", "row"), '{"ph":"X","pid":1,"tid":', ("int", "tid"), ',"ts":', ("us", "ts"), ',"dur":',
    ("piece", "dur_text", 1), ("skip_nonneg", "dur_text", 1), ("us", "dur"), ',"name":',
    ("skip_neg", "step", 6), '"ProfilerStep#', ("int", "step"), '","cat":"step","args":{"step":', ("int", "step"), "}}",
    ("stop_nonneg", "step"),
    ("piece", "name", 0), ("piece", "mid", 0), ("piece", "corr_key", 0), ("skip_neg", "corr_shown", 1),
    ("int", "corr"), "}}"])

def split_instants(rec: Any, tids: dict[str, int]) -> tuple[dict[str, list[tuple]], list[tuple]]:
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


class FlowSources:
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


def host_slices(rec: Any, tids: dict[str, int], w: TraceWriter, flows: FlowSources) -> list:
    """Every host thread's track (its spans and ProfilerStep slices, nested), feeding each thread's launch
    spans to `flows`; returns the instants that are not steps. Only one track's arrays exist at a time."""
    chunks, values, odd_corr = _host_chunks(rec)
    steps, other_instants = split_instants(rec, tids)
    op_call = next((c for c, v in enumerate(values) if type(v) is str and v == OP_CALL), -1)
    texts = _HostTexts(w, values, odd_corr)
    for code, thread in _thread_order(chunks, values, steps):
        tid = tids.get(thread, 0)
        items = steps.get(thread, [])
        s, e, ph, op, corr, rid = _track_columns(chunks, code, items)
        launch = (corr >= 0) & (ph != op_call) & (rid >= 0)
        if len(texts.odd_rows):
            launch &= ~np.isin(rid, texts.odd_rows)
        flows.feed(corr[launch], e[launch], s[launch], tid)
        del launch
        perm = track_order(s, e, rid)
        s, e, ph, op, corr, rid = s[perm], e[perm], ph[perm], op[perm], corr[perm], rid[perm]
        del perm
        e, durs = nest_durations(s, e)
        _track_blocks(w, texts, tid, items, s, e, durs, ph, op, corr, rid, ph == op_call)
        del s, e, durs, ph, op, corr, rid  # before the next track's arrays exist
    return other_instants


def _host_chunks(rec: Any) -> tuple[list, list, dict[int, Any]]:
    """The host records' chunks (thread, phase and op codes; start, dur and corr arrays with their odd values),
    the code values, and the correlation ids that are not plain integers (by record)."""
    names = ("thread", "phase", "op")
    chunks = list(zip(*(rec.coded_chunks("host", c) for c in names),
                      *(rec.numeric_chunks("host", c, t) for c, t in (("start", "d"), ("dur", "d"), ("corr", "q")))))
    odd_corr: dict[int, Any] = {}
    for *_codes, (_s, odd_s), (_d, odd_d), (_c, odd_c) in chunks:
        bad = [v for v in (*odd_s.values(), *odd_d.values()) if type(v) not in (int, float)]
        if bad:
            raise InvalidArgumentError(f"recorder host records: {bad[0]!r} is not a number of microseconds")
        odd_corr.update(odd_c)
    return chunks, rec.code_values(), odd_corr


def _thread_order(chunks: list, values: list, steps: dict[str, list[tuple]]) -> list[tuple[int, Any]]:
    """(thread code, name) in first appearance in the host records, then tracks that only have steps (code -1)."""
    first: dict[int, int] = {}
    base = 0
    for th_c, *_rest in chunks:
        for c in np.flatnonzero(np.bincount(th_c)).tolist() if len(th_c) else ():
            first.setdefault(c, base + int(np.argmax(th_c == c)))
        base += len(th_c)
    order = [(c, values[c]) for c in sorted(first, key=first.get)]
    seen = {v for _c, v in order}
    return order + [(-1, track) for track in steps if track not in seen]


class _HostTexts:
    """The shared text pieces of host rows: names, the middles of spans and calls, the corr key."""

    def __init__(self, w: TraceWriter, values: list, odd_corr: dict[int, Any]) -> None:
        every = np.arange(len(values), dtype=np.int64)
        self.values, self.odd_corr = values, odd_corr
        self.odd_rows = np.array(sorted(odd_corr), dtype=np.int64)
        self.op_name = w.lookup(values, every)
        self.host_mid = w.lookup(values, every, lambda v: ',"cat":"host","args":{"op":' + json_value(v))
        self.call_mid = w.shared.code(',"cat":"op_call","args":{"corr":')
        self.corr_key = w.shared.code(',"corr":')


def _track_columns(chunks: list, code: int, items: list[tuple]) -> tuple[Any, ...]:
    """One track's columns (start and end ns, phase and op codes, corr, record id; steps first with negative
    record ids, as they come first on a tie), filled in place."""
    n_steps = len(items)
    sels = [np.flatnonzero(th_c == code) if code >= 0 else np.empty(0, np.int64) for th_c, *_rest in chunks]
    n_rows = n_steps + sum(map(len, sels))
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
    check_us(s, e)
    return s, e, ph, op, corr, rid


def _track_blocks(w: TraceWriter, texts: _HostTexts, tid: int, items: list[tuple], s: Any, e: Any, durs: Any,
                  ph: Any, op: Any, corr: Any, rid: Any, is_call: Any) -> None:
    """A sorted, nested track's rows, written a block at a time."""
    n_steps = len(items)
    values, odd_rows = texts.values, texts.odd_rows
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
            row[k] = own.code(_dump({"ph": "X", "pid": HOST_PID, "tid": tid, "ts": _us(st_s), "dur": float(bd[k]),
                                     "name": f"ProfilerStep#{n_step}", "cat": "step", "args": {"step": n_step}}))
        if len(odd_rows):
            for k in np.flatnonzero(np.isin(brid, odd_rows)).tolist():
                row[k] = own.code(_host_event(tid, int(bs[k]), float(bd[k]), values[ph[b0 + k]],
                                              values[op[b0 + k]], texts.odd_corr[int(brid[k])]))
        dur_ns, dur_text = dur_texts(own, bs, be, bd)
        call, b_op, b_corr = is_call[b0:b1], op[b0:b1], corr[b0:b1]
        w.block(_HOST_ROW, n, {
            "row": row, "step": step, "tid": np.full(n, tid, dtype=np.int64), "ts": bs, "dur_text": dur_text,
            "dur": dur_ns, "name": np.where(call, texts.op_name[b_op], texts.op_name[ph[b0:b1]]),
            "mid": np.where(call, texts.call_mid, texts.host_mid[b_op]),
            "corr_key": np.where(~call & (b_corr >= 0), texts.corr_key, -1),
            "corr_shown": np.where(call | (b_corr >= 0), 0, -1), "corr": b_corr}, own)
