"""trace.json's device tracks: a track per stream, the flow arrows into them, the counters and cache instants."""
from __future__ import annotations

from typing import Any

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.trace.chrome_host import FlowSources
from opsim.trace.chrome_rows import (BLOCK, HOST_FUNC, HOST_PID, TraceWriter, check_us, dur_texts,
                                     rounded_texts, time_column, track_order)
from opsim.trace.json_rows import Pieces, Template, json_value
from opsim.trace.timefmt import nest_durations, to_ns, to_ns_array, ts_float

_ns = to_ns
_us = ts_float
_dump = json_value  # an event formatted by Python

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


def _device_event(dev_pid: int, s_ns: int, dur: float, v: dict[str, Any]) -> str:
    """A device slice formatted by Python (a value of an unusual type)."""
    args = {"task_id": v["task_id"], "task_type": v["task_type"], "block_dim": v["block_dim"],
            "unit_pool": v["unit_kind"], "units": v["units"], "queued_us": round(v["queued"], 3),
            "wait_us": round(v["start"] - v["queued"], 3)}
    if v["corr"] >= 0:
        args["corr"] = v["corr"]
    return _dump({"ph": "X", "pid": dev_pid, "tid": v["stream"] + 1, "ts": _us(s_ns), "dur": dur,
                  "name": v["op"] or v["task_type"], "cat": v["task_type"], "args": args})


class DeviceColumns:
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
        check_us(self.s, self.e)
        host_func = next((c for c, v in enumerate(self.values) if type(v) is str and v == HOST_FUNC), -1)
        fmask = self.corr >= 0
        if host_func >= 0:
            fmask &= self.ttype != host_func
        if self.odd_rows:
            fmask &= ~np.isin(keep, list(self.odd_rows))
        self.fmask = fmask
        self.q_corr = self.corr[fmask]
        self.q_ns = to_ns_array(self.queued[fmask])


def device_slices(dev: DeviceColumns, dev_pid: int, flows: FlowSources, w: TraceWriter) -> dict[str, tuple]:
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
        perm = track_order(d_s[idx], d_e[idx], idx)
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
            dur_ns, dur_text = dur_texts(own, bs, be, bd)
            q, s = dev.queued[sel], dev.start[sel]
            q_k, q_text = rounded_texts(own, q)
            w_k, w_text = rounded_texts(own, s - q)
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


def counters(rec: Any, device_id: int, dev_pid: int, pools: dict[str, tuple], w: TraceWriter) -> None:
    """HBM in use, busy units of each pool, then every recorded counter."""
    t = to_ns_array(time_column(rec, "memory", "time"))
    dev, odd_dev = rec.numeric("memory", "device", "q")
    in_use, odd_use = rec.numeric("memory", "in_use", "q")
    check_us(t)
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


def cache_instants(rec: Any, tids: dict[str, int], dev_pid: int, w: TraceWriter) -> None:
    """Cache outcomes: on the thread's track, else process-wide on the device."""
    t = to_ns_array(time_column(rec, "cache", "time"))
    check_us(t)
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
