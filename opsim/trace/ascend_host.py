"""The recorder's host spans as numpy columns, and the CANN-level spans (`ApiSpans`) derived from them.

A million-call run records seven million host spans: they are read as code and int64 columns (no Python object
per span), and the CANN spans are built a distinct call shape at a time (`_span_program`), their times gathered
with numpy. See ascend_profiler.py for how opsim's host phases map onto torch_npu's AscendCL and Node spans.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from opsim.trace.ascend_model import API_KINDS, ApiSpans, OpCalls
from opsim.trace.timefmt import to_ns_array

# Runtime host phases (opsim cost-model names) -> the ACL API they stand for.
_RUNTIME_API = {"rt malloc": "aclrtMalloc", "rt free": "aclrtFree", "stream sync": "aclrtSynchronizeStream"}
_EVENT_LAUNCH_API = {"RecordEvent": "aclrtRecordEvent", "StreamWaitEvent": "aclrtStreamWaitEvent"}
_LAUNCH_PHASES = frozenset({"launch", "Launch"})
_PHASE1_ENTRY = "L2 phase1 entry"
_PHASE2_ENTRY = "L2 phase2 entry"
OP_CALL = "op_call"
_QUEUE_PHASES = frozenset({"enqueue", "dequeue", "dequeue gap"})
"""torch_npu's task-queue costs: part of no AscendCL API span."""


@dataclass
class HostColumns:
    """Every host span: thread, phase and op as codes into ``values``, corr, and epoch-ns start and end."""

    thread: np.ndarray
    phase: np.ndarray
    op: np.ndarray
    values: list
    corr: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.corr)

    def code(self, value: Any) -> int:
        """The code of `value` (-1 when no span has it)."""
        try:
            return self.values.index(value)
        except ValueError:
            return -1

    first_ns: int | None = None
    """With a phase filter (`call_columns`): the first start and last end of every span, not only those kept."""
    last_ns: int | None = None
    threads_seen: list | None = None
    """With a phase filter: the threads of every span in order of their first span."""

    def thread_names(self) -> list:
        """The threads in order of their first span."""
        if self.threads_seen is not None:
            return list(self.threads_seen)
        codes, first = np.unique(self.thread, return_index=True)
        return [self.values[c] for c in codes[np.argsort(first, kind="stable")].tolist()]

    def bounds(self) -> tuple[list[int], list[int]]:
        """([first start], [last end]) of every span, ([], []) without spans."""
        if self.first_ns is not None:
            return [self.first_ns], [self.last_ns]
        if not len(self):
            return [], []
        return [int(self.start_ns.min())], [int(self.end_ns.max())]


def exact(odd: dict, typecode: str) -> bool:
    """Whether a numeric column's odd values (`Recorder.numeric`) are in its array as a list would convert them:
    none, or plain ints within 2**53 in a float column (a span at time 0 starts at the int 0)."""
    return not odd or typecode == "d" and all(type(v) is int and -(1 << 53) <= v <= (1 << 53) for v in odd.values())


def host_columns(rec: Any, epoch_ns: int, since_us: float | None = None) -> HostColumns:
    """The host records as `HostColumns` (codes and arrays straight from the recorder's chunks when it keeps
    them; from `records` lists otherwise). Times are rounded as `to_ns` rounds them. With `since_us` (the
    profiler's start after a warm-up, opsim.trace.profiler_window) only the spans that began then or later."""
    if getattr(rec, "coded", None) is not None and getattr(rec, "numeric", None) is not None:
        thread, values = rec.coded("host", "thread")
        phase, _ = rec.coded("host", "phase")
        op, _ = rec.coded("host", "op")
        cols = {}
        for c, tc in (("start", "d"), ("dur", "d"), ("corr", "q")):
            arr, odd = rec.numeric("host", c, tc)
            cols[c] = arr if exact(odd, tc) else rec.records("host")[c]
    else:
        host = rec.records("host")
        index: dict[Any, int] = {}
        values = []

        def encode(col: list) -> np.ndarray:
            out = np.empty(len(col), dtype=np.int64)
            for i, v in enumerate(col):
                c = index.get(v)
                if c is None:
                    c = index[v] = len(values)
                    values.append(v)
                out[i] = c
            return out
        thread, phase, op = encode(host["thread"]), encode(host["phase"]), encode(host["op"])
        cols = host
    start = np.asarray(cols["start"], dtype=np.float64)
    end = start + np.asarray(cols["dur"], dtype=np.float64)
    corr = np.asarray(cols["corr"], dtype=np.int64)
    thread, phase, op = np.asarray(thread), np.asarray(phase), np.asarray(op)
    if since_us is not None:
        keep = np.flatnonzero(start >= since_us)
        if len(keep) < len(start):
            start, end, corr = start[keep], end[keep], corr[keep]
            thread, phase, op = thread[keep], phase[keep], op[keep]
    start_ns = to_ns_array(start) + epoch_ns
    end_ns = to_ns_array(end) + epoch_ns
    del start, end
    return HostColumns(thread, phase, op, list(values), corr, start_ns, end_ns)  # codes: 2 bytes a row


def call_columns(rec: Any, epoch_ns: int, since_us: float | None = None) -> HostColumns:
    """`host_columns` of the ``op_call`` spans only, read chunk by chunk (a million-call run's seven million
    spans are never columns at once), with the first start, last end and thread order of every span. Falls back
    to `host_columns` filtered afterwards when the recorder keeps no typed chunks or a column holds odd values."""
    if getattr(rec, "coded_chunks", None) is None or getattr(rec, "numeric_chunks", None) is None:
        return _only_calls(host_columns(rec, epoch_ns, since_us=since_us))
    values = rec.code_values()
    numeric = [rec.numeric_chunks("host", c, tc) for c, tc in (("start", "d"), ("dur", "d"), ("corr", "q"))]
    if not all(exact(odd, tc) for col, tc in zip(numeric, "ddq") for _, odd in col):
        return _only_calls(host_columns(rec, epoch_ns, since_us=since_us))
    code = values.index(OP_CALL) if OP_CALL in values else -1
    parts: list[tuple] = []
    first: list[int] = []
    last: list[int] = []
    seen: dict = {}
    coded = zip(*(rec.coded_chunks("host", c) for c in ("thread", "phase", "op")))
    for (thread, phase, op), (start, _), (dur, _), (corr, _) in zip(coded, *numeric):
        start = np.asarray(start, dtype=np.float64)
        end = start + np.asarray(dur, dtype=np.float64)
        if since_us is not None:
            keep = np.flatnonzero(start >= since_us)
            start, end, corr, thread, phase, op = start[keep], end[keep], corr[keep], thread[keep], phase[keep], op[keep]
        if not len(start):
            continue
        first.append(int(to_ns_array(np.array([start.min()]))[0]) + epoch_ns)
        last.append(int(to_ns_array(np.array([end.max()]))[0]) + epoch_ns)
        codes, at = np.unique(thread, return_index=True)
        seen.update(dict.fromkeys(values[c] for c in codes[np.argsort(at, kind="stable")].tolist()))
        rows = np.flatnonzero(phase == code)
        parts.append((thread[rows].astype(np.int32), phase[rows].astype(np.int32), op[rows].astype(np.int32),
                      np.asarray(corr[rows], dtype=np.int64), to_ns_array(start[rows]) + epoch_ns,
                      to_ns_array(end[rows]) + epoch_ns))
    cols = [np.concatenate([p[k] for p in parts]) if parts else np.empty(0, np.int64) for k in range(6)]
    return HostColumns(cols[0], cols[1], cols[2], list(values), cols[3], cols[4], cols[5],
                       min(first, default=None), max(last, default=None), list(seen))


def _only_calls(host: HostColumns) -> HostColumns:
    """`host` with only its ``op_call`` spans (and the bounds and thread order of all of them)."""
    firsts, lasts = host.bounds()
    rows = np.flatnonzero(host.phase == host.code(OP_CALL))
    return HostColumns(host.thread[rows], host.phase[rows], host.op[rows], host.values, host.corr[rows],
                       host.start_ns[rows], host.end_ns[rows], firsts[0] if firsts else None,
                       lasts[0] if lasts else None, host.thread_names())


def call_apis(rec: Any) -> dict[int, str]:
    """corr -> API of every ``op_call`` host span (the last span of a corr wins), read from the recorder's code
    and int columns when it keeps them (no list of the host records)."""
    if getattr(rec, "coded", None) is None or getattr(rec, "numeric", None) is None:
        host = rec.records("host")
        return {corr: op for phase, op, corr in zip(host["phase"], host["op"], host["corr"])
                if phase == OP_CALL and corr >= 0}
    phase, values = rec.coded("host", "phase")
    corr, odd = rec.numeric("host", "corr", "q")
    if odd:
        corr = np.asarray(rec.records("host")["corr"], dtype=np.int64)
    code = values.index(OP_CALL) if OP_CALL in values else -1
    rows = np.flatnonzero((phase == code) & (corr >= 0))
    del phase
    op, _ = rec.coded("host", "op")
    return dict(zip(corr[rows].tolist(), [values[c] for c in op[rows].tolist()]))


def first_call_rows(host: HostColumns) -> np.ndarray:
    """The row of each ACLNN call: the first ``op_call`` span of each correlation id, in record order."""
    code = host.code(OP_CALL)
    rows = np.flatnonzero((host.phase == code) & (host.corr >= 0)) if code >= 0 else np.empty(0, np.int64)
    _, first = np.unique(host.corr[rows], return_index=True)
    return rows[np.sort(first)]


def api_spans(host: HostColumns, calls: OpCalls, tids: dict[str, int]) -> ApiSpans:
    """CANN-level spans: the two ACLNN phases of each call (``calls``: their corr and API), kernel launches and
    runtime calls. Each span is on the thread that ran it (a call's phase 2 may run on torch_npu's task-queue
    thread). The spans a call's host rows give depend only on their phases, ops and threads: worked out once per
    distinct call (`_span_program`), then filled with each call's times. Sorted by (start, -end, tid, kind,
    name), ties in the order the spans are found (runtime calls in record order, then each call's)."""
    vals = host.values
    n_vals = max(len(vals), 1)
    tid_of = np.array([tids.get(v, 0) for v in vals] or [0], np.int64)
    not_call = host.phase != host.code(OP_CALL)
    in_calls = np.isin(host.corr, calls.corr) & not_call
    parts: list[tuple] = []  # (kind, name, tid, start, end, corr, pre-order key 1, 2, 3)
    names: dict[str, int] = {}
    # runtime calls outside any ACLNN call, in record order
    rows = np.flatnonzero(not_call & ~in_calls)
    if len(rows):
        pair = host.phase[rows].astype(np.int64) * n_vals + host.op[rows]
        uniq, inv = np.unique(pair, return_inverse=True)
        apis = [_runtime_api(vals[p // n_vals], vals[p % n_vals]) for p in uniq.tolist()]
        name_of = np.array([-1 if a is None else names.setdefault(a, len(names)) for a in apis], np.int64)
        keep = name_of[inv] >= 0
        rows, named = rows[keep], name_of[inv][keep]
        parts.append((np.zeros(len(rows), np.int8), named.astype(np.int32), tid_of[host.thread[rows]],
                      host.start_ns[rows], host.end_ns[rows], host.corr[rows], np.zeros(len(rows), np.int8), rows,
                      np.zeros(len(rows), np.int32)))
    parts += _call_spans(host, np.flatnonzero(in_calls), calls, tid_of, names)
    return _sorted_spans(parts, names)


def _call_spans(host: HostColumns, rows: np.ndarray, calls: OpCalls, tid_of: np.ndarray,
                names: dict[str, int]) -> list[tuple]:
    """The spans of each call's rows (`rows`: the calls' non-``op_call`` rows), a distinct call shape at a time."""
    if not len(rows):
        return []
    vals = host.values
    corr = host.corr[rows]
    _, first, inv = np.unique(corr, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))  # calls in order of their first row
    order = np.lexsort((rows, rank[inv]))
    rows, group = rows[order], rank[inv][order]
    bounds = np.flatnonzero(np.r_[True, group[1:] != group[:-1], True])
    shape = np.stack([host.phase[rows], host.op[rows], host.thread[rows]], axis=1)
    programs: dict[tuple, int] = {}
    program_list: list[list] = []
    prog = np.empty(len(bounds) - 1, np.int64)
    group_api = calls.api[calls.index_of(host.corr[rows[bounds[:-1]]])].tolist()
    for g, (lo, hi, a) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist(), group_api)):
        api = calls.apis[a]
        key = (api, shape[lo:hi].tobytes())
        p = programs.get(key)
        if p is None:
            p = programs[key] = len(program_list)
            program_list.append(_span_program(api, [(vals[ph], vals[o], int(tid_of[t]))
                                                    for ph, o, t in shape[lo:hi].tolist()]))
        prog[g] = p
    parts = []
    starts = bounds[:-1]
    for p, program in enumerate(program_list):
        groups = np.flatnonzero(prog == p)
        base = starts[groups]
        for j, (kind, name, tid, a, b) in enumerate(program):
            n = len(groups)
            parts.append((np.full(n, API_KINDS.index(kind), np.int8),
                          np.full(n, names.setdefault(name, len(names)), np.int32), np.full(n, tid, np.int64),
                          host.start_ns[rows[base + a]], host.end_ns[rows[base + b]], host.corr[rows[base]],
                          np.ones(n, np.int8), groups, np.full(n, j, np.int32)))
    return parts


def _sorted_spans(parts: list[tuple], names: dict[str, int]) -> ApiSpans:
    """The spans of `parts` by (start, -end, tid, kind, name), ties by their pre-order keys: one lexsort."""
    name_list = list(names)
    by_column = [list(c) for c in zip(*parts)] if parts else [[np.empty(0, np.int64)] for _ in range(9)]
    parts.clear()  # each column's parts are dropped once it is joined: the spans are held about once, not twice
    cols = []
    for k in range(9):
        cols.append(np.concatenate(by_column[k]))
        by_column[k] = []
    kind, name, tid, start, end, corr, k1, k2, k3 = cols
    del cols
    name_rank = np.empty(len(name_list), np.int32)
    name_rank[sorted(range(len(name_list)), key=name_list.__getitem__)] = np.arange(len(name_list))
    order = np.lexsort((k3, k2, k1, name_rank[name] if len(name) else name, kind, tid, -end, start))
    del k1, k2, k3
    return ApiSpans(kind[order].astype(np.int8), name[order].astype(np.int32), name_list, tid[order],
                    start[order], end[order], corr[order])


def _span_program(api: str, rows: list[tuple[str, str, int]]) -> list[tuple[str, str, int, int, int]]:
    """The spans of one call's host rows (phase, op, tid) as (kind, name, tid, row of the start, row of the end)."""
    out: list[tuple[str, str, int, int, int]] = []
    group: list[Any] | None = None  # [name, start row, end row, tid]
    for j, (phase, op, tid) in enumerate(rows):
        if group is not None and group[3] != tid:
            out.append(("acl", group[0], group[3], group[1], group[2]))
            group = None
        if phase == _PHASE1_ENTRY or phase == _PHASE2_ENTRY:
            if group is not None:
                out.append(("acl", group[0], group[3], group[1], group[2]))
            # the span's op is the API its DFX entry named (a profiled op may name phase 1 differently)
            name = (op or api) + ("GetWorkspaceSize" if phase == _PHASE1_ENTRY else "")
            group = [name, j, j, tid]
            continue
        if phase in _QUEUE_PHASES:
            if group is not None:
                out.append(("acl", group[0], group[3], group[1], group[2]))
                group = None
            continue
        if phase in ("rt malloc", "rt free"):  # the application's calls between the two phases
            if group is not None:
                out.append(("acl", group[0], group[3], group[1], group[2]))
                group = None
            out.append(("acl", _RUNTIME_API[phase], tid, j, j))
            continue
        if group is not None:
            group[2] = j
        if phase in _LAUNCH_PHASES and op not in _EVENT_LAUNCH_API:
            out.append(("node", "launch", tid, j, j))
        else:
            runtime = _runtime_api(phase, op)
            if runtime is not None:
                out.append(("acl", runtime, tid, j, j))
    if group is not None:
        out.append(("acl", group[0], group[3], group[1], group[2]))
    return out


def _runtime_api(phase: str, op: str) -> str | None:
    if phase in _RUNTIME_API:
        return _RUNTIME_API[phase]
    if phase == "launch" and op in _EVENT_LAUNCH_API:
        return _EVENT_LAUNCH_API[op]
    return None
