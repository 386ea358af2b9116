"""The torch_npu database layout of a simulated run: ``ascend_pytorch_profiler_<rank>.db`` and ``analysis.db``.

msprof-analyze's cluster recipes (``compute_op_sum``, ``cann_api_sum``, ...) only read this layout, and
``compare`` / ``advisor`` prefer it when present (they then derive e2e, compute and free time from TASK rather
than from an Overlap Analysis track). The tables and columns are the ones msprof-analyze queries; text values
are ids into STRING_IDS, times are integer epoch nanoseconds (PMU times too), ``analysis.db`` is in
microseconds. Everything comes from the same ``AscendProfile`` the text files are written from.
"""
from __future__ import annotations

import operator
import os
import sqlite3
from typing import Any, Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence

import numpy as np
from opsim.trace.ascend_comm_db import (ANALYSIS_COMM_TABLES, analysis_comm_rows, communication_db_rows,
                                       communication_ops)
from opsim.trace.ascend_db_schema import ENUM_API_TYPE, ENUM_TABLES, META_DATA, PROFILER_DB_TABLES
from opsim.trace.ascend_memory import memory_db_rows, memory_strings
from opsim.trace.ascend_model import API_KINDS, FILE_MODE, MODEL_ID_NONE, AscendProfile, OpCalls
from opsim.trace.ascend_pmu import KernelPmu
from opsim.trace.ascend_tables import quoted_shape
from opsim.outputs import atomic_path

__all__ = ["write_profiler_db", "ENUM_API_TYPE", "PROFILER_DB_TABLES", "RTS_TASK_TYPE", "with_depth"]

_API_TYPE_ID = {name: i for i, name in ENUM_API_TYPE.items()}

RTS_TASK_TYPE = {"AI_CORE": "KERNEL_AICORE", "AI_VECTOR_CORE": "KERNEL_AIVEC", "AI_CPU": "KERNEL_AICPU",
                 "MIX_AIC": "KERNEL_MIX_AIC", "MIX_AIV": "KERNEL_MIX_AIV", "EVENT_RECORD_SQE": "EVENT_RECORD",
                 "EVENT_WAIT_SQE": "EVENT_WAIT"}
"""Profiler task type -> the runtime task type TASK.taskType holds (others are kept as they are)."""

CONTEXT_ID_NONE = 4294967295
BLOCK_ROWS = 65_536
"""Rows converted to Python values at a time while a table is inserted (bounds what is held)."""
HOST_NAME = "opsim"
"""HOST_INFO: the simulated host's name (its uid is a fixed "0": no real host ran it)."""

ANALYSIS_DB_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "StepTraceTime": (("deviceId", "INTEGER"), ("step", "TEXT"), ("computing", "NUMERIC"),
                      ("communication_not_overlapped", "NUMERIC"), ("overlapped", "NUMERIC"),
                      ("communication", "NUMERIC"), ("free", "NUMERIC"), ("stage", "NUMERIC"), ("bubble", "NUMERIC"),
                      ("communication_not_overlapped_and_exclude_receive", "NUMERIC"), ("preparing", "NUMERIC")),
}

_PMU_SIDES = (("aic", "aic_total_time", "aic_total_cycles", "aic_mac_time", "aic_mac_ratio", "aic_scalar_time",
               "aic_scalar_ratio"),
              ("aiv", "aiv_total_time", "aiv_total_cycles", "aiv_vec_time", "aiv_vec_ratio", "aiv_scalar_time",
               "aiv_scalar_ratio"))
"""TASK_PMU_INFO names per core side; ``*_total_time`` marks the side (the tools read aic_total_time as cube)."""


class _Strings(dict):
    """STRING_IDS: each distinct text gets the next id, in first-use order (deterministic). ``sid[text]`` is
    the id (a plain dict look-up once known); ``sid(text)`` also passes None through."""

    def __missing__(self, text: str) -> int:
        i = self[text] = len(self)
        return i

    def __call__(self, text: str | None) -> int | None:
        return None if text is None else self[text]

    @property
    def ids(self) -> dict[str, int]:
        return self


def _pmu_cells(pmu: KernelPmu | None, sid: Mapping[str, int]) -> list[tuple[int, int | float]]:
    """(name id, value) of the TASK_PMU_INFO rows of one kernel (times in ns): only the core side(s) it ran on;
    none for AI CPU."""
    cells: list[tuple[int, int | float]] = []
    if pmu is None:
        return cells
    for side, total, cycles, pipe, pipe_ratio, scalar, scalar_ratio in _PMU_SIDES:
        s = getattr(pmu, side)
        if s is None or s.total_ns == 0:
            continue
        for name, value in ((total, s.total_ns), (cycles, s.cycles), (pipe, s.pipe_ns),
                            (pipe_ratio, float(s.pipe_ratio)), (scalar, s.scalar_ns),
                            (scalar_ratio, float(s.scalar_ratio))):
            cells.append((sid[name], value))
    return cells


def _create(conn: sqlite3.Connection, tables: dict[str, tuple[tuple[str, str], ...]]) -> None:
    for table, cols in tables.items():
        conn.execute(f"CREATE TABLE {table} ({', '.join(f'{c} {t}' for c, t in cols)})")


def _insert(conn: sqlite3.Connection, table: str, ncols: int, rows: Iterable[tuple]) -> None:
    """Insert `rows` (any iterable: sqlite3 draws a generator's rows one at a time, so none is held whole)."""
    conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * ncols)})", rows)


def _write_db(path: str, fill: Callable[[sqlite3.Connection], None]) -> None:
    """A fresh database at `path`, filled by `fill` and renamed into place only when complete."""
    with atomic_path(path) as tmp:
        conn = sqlite3.connect(tmp)
        try:
            fill(conn)
            conn.commit()
        finally:
            conn.close()
    os.chmod(path, FILE_MODE)


def profiler_db_rows(p: AscendProfile, rank: int, collectives: Sequence[Any] | None = None
                     ) -> dict[str, list[tuple]]:
    """`profiler_db_tables` with every table's rows in a list (for tests and small runs)."""
    return {table: list(rows) for table, rows in profiler_db_tables(p, rank, collectives).items()}


def profiler_db_tables(p: AscendProfile, rank: int, collectives: Sequence[Any] | None = None
                       ) -> dict[str, Iterable[tuple]]:
    """The rows of every profiler DB table, in table order, each table's drawn only as it is inserted (no table
    of a large run is held whole); a job's rank also gets its `collectives` (COMMUNICATION_OP and their launches,
    ascend_comm_db.py). Tables of what opsim does not model (communication sub-tasks, HBM bandwidth, LLC, ...)
    stay empty. STRING_IDS comes first, complete: `_string_ids` numbers every text in the order the rows first
    use it (a job's communication strings after the others', so the tables a single rank has keep their ids),
    and the other tables only look their texts up."""
    comm = communication_ops(p, collectives) if collectives else []
    sid, comm_rows, launches = _string_ids(p, comm)
    tables: dict[str, Iterable[tuple]] = {t: () for t in PROFILER_DB_TABLES}
    for table, values in ENUM_TABLES.items():
        tables[table] = sorted(values.items())
    tables["STRING_IDS"] = [(i, text) for text, i in sid.items()]
    call_corrs = p.op_calls.corr
    tables["TASK"] = _task_table(p, sid, call_corrs, {op.task: op.conn for op in comm})
    tables["COMPUTE_TASK_INFO"] = _compute_table(p, sid)
    tables["TASK_PMU_INFO"] = _pmu_table(p, sid)
    tables["CANN_API"] = _cann_api_table(p, sid, call_corrs, launches)
    if comm:
        tables["COMMUNICATION_OP"] = comm_rows
    tables["PYTORCH_API"] = _pytorch_api_table(p, sid)
    tables["PYTORCH_CALLCHAINS"] = _callchains(p, sid)
    tables["CONNECTION_IDS"] = ((c, c) for c in p.op_calls.corr.tolist())
    tables["connectionCats"] = ((c, "async_npu") for c in np.unique(p.tasks.corr[p.tasks.call >= 0]).tolist())
    tables["STEP_TIME"] = [(w.step, w.start_ns, w.end_ns) for w in p.step_windows]
    tables["RANK_DEVICE_MAP"] = [(rank, p.device_id)]
    _session_rows(p, tables)
    tables.update(memory_db_rows(p, sid))
    return tables


def _string_ids(p: AscendProfile, comm: Sequence[Any]) -> tuple[dict[str, int], list[tuple], list[tuple]]:
    """STRING_IDS: each distinct text the tables use gets the next id, in the order the tables' rows (TASK,
    COMPUTE_TASK_INFO and TASK_PMU_INFO task by task, CANN_API, PYTORCH_API's steps and calls, the memory tables)
    first use it. A kernel whose name, type, op, tensors and PMU split an earlier one had adds no text. Also the
    rows of a job's collectives `comm` (COMMUNICATION_OP, and their launches for CANN_API), which number their
    texts last."""
    sid = _Strings()
    seen: set[tuple] = set()
    tasks = p.tasks
    texts, tensor_list, pmu_list = tasks.texts, tasks.tensor_list, tasks.pmu_list
    rts = [RTS_TASK_TYPE.get(t, t) for t in texts]
    kernel = tasks.is_kernel().tolist()
    for is_kernel, key in zip(kernel, zip(tasks.task_type.tolist(), tasks.name.tolist(), tasks.op.tolist(),
                                          tasks.tensors.tolist(), tasks.pmu.tolist())):
        tt = key[0]
        sid[rts[tt]]
        if not is_kernel or key in seen:
            continue
        seen.add(key)
        _, name, op, ti, pmu = key
        for text in (texts[name], texts[tt], texts[op], *_tensor_texts(tensor_list[ti] if ti >= 0 else {}), "",
                     "static", "NO"):
            sid[text]
        _pmu_cells(pmu_list[pmu] if pmu >= 0 else None, sid)
    spans = p.api_spans
    _, first = np.unique(spans.name, return_index=True)
    for i in spans.name[np.sort(first)].tolist():  # the span names in order of first use
        sid[spans.names[i]]
    for w in p.steps:
        sid[f"ProfilerStep#{w.step}"]
    _call_strings(p.op_calls, sid)
    memory_strings(p, sid)
    comm_rows, launches = communication_db_rows(p, comm, sid) if comm else ([], [])
    return dict(sid), comm_rows, launches


def _call_strings(calls: OpCalls, sid: MutableMapping[str, int]) -> None:
    """Number the calls' texts as a pass over the calls would (each call's torch name, "", its call stack): the
    texts in order of their first use."""
    if not len(calls):
        return
    names = calls.torch_names()
    stacks, stack_texts = calls.call_stacks()
    uses: list[tuple[int, int, str]] = [(0, 1, "")]
    for text, first in _first_uses([names[a] for a in range(len(names))], calls.api).items():
        uses.append((first, 0, text))
    _, first = np.unique(stacks, return_index=True)
    uses += [(f, 2, stack_texts[k]) for k, f in enumerate(first.tolist())]
    for _, _, text in sorted(uses):
        sid[text]


def _first_uses(texts: list[str], codes: np.ndarray) -> dict[str, int]:
    """Each text's first row among `codes` (codes into `texts`; equal texts of two codes: the earlier row)."""
    uniq, first = np.unique(codes, return_index=True)
    out: dict[str, int] = {}
    for c, f in zip(uniq.tolist(), first.tolist()):
        out[texts[c]] = min(f, out.get(texts[c], f))
    return out


def _callchains(p: AscendProfile, sid: Mapping[str, int]) -> Iterator[tuple]:
    """PYTORCH_CALLCHAINS: each call's chain (its position in `op_calls`) and call stack."""
    stacks, stack_texts = p.op_calls.call_stacks()
    ids = np.array([sid[t] for t in stack_texts] or [0], dtype=np.int64)
    return ((chain, s, 0) for chain, s in enumerate(ids[stacks].tolist()))


def _tensor_texts(ti: dict[str, str]) -> tuple[str, ...]:
    """COMPUTE_TASK_INFO's six tensor texts (formats, data types, quoted shapes; inputs, then outputs)."""
    return (ti.get("input_formats", ""), ti.get("input_data_types", ""), quoted_shape(ti.get("input_shapes", "")),
            ti.get("output_formats", ""), ti.get("output_data_types", ""), quoted_shape(ti.get("output_shapes", "")))


def _task_table(p: AscendProfile, sid: dict[str, int], call_corrs: np.ndarray,
                comm_conn: dict[int, int]) -> Iterator[tuple]:
    """TASK: every shown task, with its nesting depth on its stream, `BLOCK_ROWS` rows at a time; `comm_conn`
    gives a collective's task its op's connectionId."""
    t = p.tasks
    depth = depths(t.start_ns, t.end_ns, t.stream)
    types = np.array([sid.get(RTS_TASK_TYPE.get(x, x), -1) for x in t.texts] or [0], dtype=np.int64)
    device = t.device
    for lo in range(0, len(t), BLOCK_ROWS):
        hi = min(lo + BLOCK_ROWS, len(t))
        corr = t.corr[lo:hi]
        known = np.isin(corr, call_corrs).tolist()
        for gid, s, e, c, k, tt, stream, task_id, d in zip(
                range(lo, hi), t.start_ns[lo:hi].tolist(), t.end_ns[lo:hi].tolist(), corr.tolist(), known,
                types[t.task_type[lo:hi]].tolist(), t.stream[lo:hi].tolist(), t.task_id[lo:hi].tolist(),
                depth[lo:hi].tolist()):
            yield (s, e, device, c if k else comm_conn.get(gid), gid, 0, tt, CONTEXT_ID_NONE, stream, task_id,
                   MODEL_ID_NONE, d)


def _compute_table(p: AscendProfile, sid: dict[str, int]) -> Iterator[tuple]:
    """COMPUTE_TASK_INFO: one row per kernel."""
    t = p.tasks
    ids = np.array([sid.get(x, -1) for x in t.texts] or [0], dtype=np.int64)
    tensor_ids = [tuple(sid[text] for text in _tensor_texts(ti)) for ti in t.tensor_list]
    no_tensors = tuple(sid[text] for text in _tensor_texts({}))
    mix_types = np.array([x in ("MIX_AIC", "MIX_AIV") for x in t.texts] or [False])
    empty, static, no = sid.get(""), sid.get("static"), sid.get("NO")
    k = np.flatnonzero(t.is_kernel())
    for lo in range(0, len(k), BLOCK_ROWS):
        rows = k[lo:lo + BLOCK_ROWS]
        bd = t.block_dim[rows]
        mix = np.where(mix_types[t.task_type[rows]], bd, 0)
        for gid, name, block_dim, m, tt, op, ti, wait in zip(
                rows.tolist(), ids[t.name[rows]].tolist(), bd.tolist(), mix.tolist(), ids[t.task_type[rows]].tolist(),
                ids[t.op[rows]].tolist(), t.tensors[rows].tolist(), t.wait_ns[rows].tolist()):
            yield (name, gid, block_dim, m, tt, op) + (tensor_ids[ti] if ti >= 0 else no_tensors) + (
                empty, wait, static, no)


def _pmu_table(p: AscendProfile, sid: dict[str, int]) -> Iterator[tuple]:
    """TASK_PMU_INFO: each kernel's PMU cells."""
    t = p.tasks
    cells = [_pmu_cells(pmu, sid) for pmu in t.pmu_list]
    k = np.flatnonzero(t.is_kernel())
    for lo in range(0, len(k), BLOCK_ROWS):
        rows = k[lo:lo + BLOCK_ROWS]
        for gid, pmu in zip(rows.tolist(), t.pmu[rows].tolist()):
            for n, v in cells[pmu] if pmu >= 0 else ():
                yield gid, n, v


def _cann_api_table(p: AscendProfile, sid: dict[str, int], call_corrs: np.ndarray,
                    launches: list[tuple]) -> Iterator[tuple]:
    """CANN_API: every CANN span, with its nesting depth on its thread, `BLOCK_ROWS` rows at a time; a job's
    collective launches (`launches`, rows without depth) are sorted in by (start, -end, thread) after the spans
    they tie with (a launch's AscendCL span encloses its Node span)."""
    s = p.api_spans
    n = len(s)
    starts, ends, tids = s.start_ns, s.end_ns, s.tid
    order = None
    if launches:
        starts = np.concatenate([starts, np.array([r[0] for r in launches], dtype=np.int64)])
        ends = np.concatenate([ends, np.array([r[1] for r in launches], dtype=np.int64)])
        tids = np.concatenate([tids, np.array([r[3] for r in launches], dtype=np.int64)])
        order = np.lexsort((tids, -ends, starts))
        starts, ends, tids = starts[order], ends[order], tids[order]
    depth = depths(starts, ends, tids)
    types = np.array([_API_TYPE_ID[k] for k in API_KINDS], dtype=np.int64)
    name_ids = np.array([sid.get(x, -1) for x in s.names] or [0], dtype=np.int64)
    for lo in range(0, len(starts), BLOCK_ROWS):
        hi = min(lo + BLOCK_ROWS, len(starts))
        rows = order[lo:hi] if order is not None else np.arange(lo, hi)
        spans = rows[rows < n]
        corr = s.corr[spans]
        known = np.isin(corr, call_corrs)
        span_rows = iter(zip(s.start_ns[spans].tolist(), s.end_ns[spans].tolist(), types[s.kind[spans]].tolist(),
                             s.tid[spans].tolist(), np.where(known, corr, -1).tolist(), known.tolist(),
                             name_ids[s.name[spans]].tolist()))
        for k, d in zip(rows.tolist(), depth[lo:hi].tolist()):
            if k >= n:
                yield launches[k - n] + (d,)
                continue
            a, b, typ, tid, c, is_call, name = next(span_rows)
            yield a, b, typ, tid, c if is_call else None, name, d


def _pytorch_api_table(p: AscendProfile, sid: dict[str, int]) -> Iterator[tuple]:
    """PYTORCH_API: the ProfilerSteps and the calls (a call's chain id is its position in `op_calls`), by start,
    longest first, then thread (ties: steps first, then calls, each in order), with their nesting depth."""
    steps, calls = p.steps, p.op_calls
    starts = np.concatenate([np.array([w.start_ns for w in steps], np.int64), calls.start_ns])
    ends = np.concatenate([np.array([w.end_ns for w in steps], np.int64), calls.end_ns])
    tids = np.concatenate([np.array([w.tid for w in steps], np.int64), calls.tid])
    order = np.lexsort((tids, -ends, starts))
    depth = depths(starts[order], ends[order], tids[order]).tolist()
    del starts, ends, tids
    op_type, empty, first_call = _API_TYPE_ID["op"], sid.get(""), len(steps)
    name_ids = [sid[t] for t in calls.torch_names()]
    c_start, c_end, c_tid = calls.start_ns.tolist(), calls.end_ns.tolist(), calls.tid.tolist()
    c_corr, c_api = calls.corr.tolist(), calls.api.tolist()
    for k, d in zip(order.tolist(), depth):
        if k < first_call:
            w = steps[k]
            yield (w.start_ns, w.end_ns, w.tid, None, sid[f"ProfilerStep#{w.step}"], -1, 0, None, None, None,
                   op_type, d)
        else:
            c = k - first_call
            yield (c_start[c], c_end[c], c_tid[c], c_corr[c], name_ids[c_api[c]], -1, 0, empty, empty, c,
                   op_type, d)


def _session_rows(p: AscendProfile, rows: dict[str, Iterable[tuple]]) -> None:
    """NPU_INFO (the SoC preset), META_DATA, SESSION_TIME_INFO, HOST_INFO and AICORE_FREQ (the preset's clock)."""
    start, end = p.session_ns
    rows["NPU_INFO"] = [(p.device_id, p.soc_name)]
    rows["META_DATA"] = list(META_DATA)
    rows["SESSION_TIME_INFO"] = [(start, end)]
    rows["HOST_INFO"] = [("0", HOST_NAME)]
    rows["AICORE_FREQ"] = [(p.device_id, start, int(p.clock_mhz))]


def with_depth(rows: list[tuple], *, track: int) -> list[tuple]:
    """`rows` (start ns, end ns, ...) with a ``depth`` column appended (in place; the list is returned): how
    many earlier rows of the same track (column `track`) still enclose the row, as torch_npu numbers nested
    calls (0 at the top level)."""
    n = len(rows)
    col = operator.itemgetter
    depth = depths(np.fromiter(map(col(0), rows), dtype=np.int64, count=n),
                   np.fromiter(map(col(1), rows), dtype=np.int64, count=n),
                   np.fromiter(map(col(track), rows), dtype=np.int64, count=n)).tolist()
    for i, d in enumerate(depth):  # in place: one table's rows held once
        rows[i] += (d,)
    return rows


def depths(starts: np.ndarray, ends: np.ndarray, tracks: np.ndarray) -> np.ndarray:
    """The `with_depth` depth of each row given its start, end and track columns (int64)."""
    order = np.lexsort((-ends, starts, tracks))  # stable: record order breaks ties
    return _depths(order, starts, ends, tracks)


def _depths(order, starts, ends, tracks):
    """The nesting depth of each row, visiting the rows in `order` (by track, start, longest first)."""
    global _depth_loop
    if _depth_loop is None:
        from numba import njit  # lazy: Numba loads only when a database with nested spans is written
        _depth_loop = njit(cache=True)(_depth_walk)
    depth = np.zeros(len(order), dtype=np.int64)
    _depth_loop(order, starts[order], ends[order], tracks[order], depth)
    return depth


def _depth_walk(order, s, e, k, depth):  # compiled by `_depths`
    stack = np.empty(len(order) + 1, dtype=np.int64)  # end ns of the open enclosing rows of the current track
    top = 0
    for j in range(len(order)):
        if j == 0 or k[j] != k[j - 1]:
            top = 0
        while top > 0 and stack[top - 1] <= s[j]:
            top -= 1
        depth[order[j]] = top
        stack[top] = e[j]
        top += 1


_depth_loop = None


def analysis_db_rows(p: AscendProfile) -> list[tuple]:
    """StepTraceTime rows (microseconds), the same figures as step_trace_time.csv."""
    return [(p.device_id, str(r.step), r.computing / 1000, r.comm_not_overlapped / 1000, r.overlapped / 1000,
             r.communication / 1000, r.free / 1000, r.stage / 1000, r.bubble / 1000,
             (r.comm_not_overlapped - r.bubble) / 1000, r.preparing / 1000) for r in p.step_rows]


def write_profiler_db(p: AscendProfile, out_dir: str, *, rank: int = 0, collectives: Sequence[Any] | None = None,
                      comm: tuple[dict, dict] | None = None) -> tuple[str, str]:
    """Write ``ascend_pytorch_profiler_<rank>.db`` and ``analysis.db`` into ``out_dir`` (ASCEND_PROFILER_OUTPUT).
    A job's rank gives its `collectives` (CollectiveRecords) and `comm`, the contents of its communication.json
    and communication_matrix.json, which analysis.db's CommAnalyzer* tables hold."""
    db_path = os.path.join(out_dir, f"ascend_pytorch_profiler_{rank}.db")

    def profiler_db(conn: sqlite3.Connection) -> None:
        _create(conn, PROFILER_DB_TABLES)
        for table, rows in profiler_db_tables(p, rank, collectives).items():
            _insert(conn, table, len(PROFILER_DB_TABLES[table]), rows)

    def analysis_db(conn: sqlite3.Connection) -> None:
        _create(conn, ANALYSIS_DB_TABLES)
        _insert(conn, "StepTraceTime", len(ANALYSIS_DB_TABLES["StepTraceTime"]), analysis_db_rows(p))
        if comm is not None:
            _create(conn, ANALYSIS_COMM_TABLES)
            for table, rows in analysis_comm_rows(*comm).items():
                _insert(conn, table, len(ANALYSIS_COMM_TABLES[table]), rows)

    _write_db(db_path, profiler_db)
    analysis_path = os.path.join(out_dir, "analysis.db")
    _write_db(analysis_path, analysis_db)
    return db_path, analysis_path
