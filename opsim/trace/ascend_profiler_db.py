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
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from opsim.trace.ascend_comm_db import (ANALYSIS_COMM_TABLES, analysis_comm_rows, communication_db_rows,
                                       communication_ops)
from opsim.trace.ascend_db_schema import ENUM_API_TYPE, ENUM_TABLES, META_DATA, PROFILER_DB_TABLES
from opsim.trace.ascend_memory import memory_db_rows
from opsim.trace.ascend_model import FILE_MODE, MODEL_ID_NONE, AscendProfile
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


def _pmu_cells(pmu: KernelPmu | None, sid: _Strings) -> list[tuple[int, int | float]]:
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
    conn.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * ncols)})", list(rows))


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
    """The rows of every profiler DB table (STRING_IDS last: it collects the strings the others use); a job's
    rank also gets its `collectives` (COMMUNICATION_OP and their launches, ascend_comm_db.py). Tables of what
    opsim does not model (communication sub-tasks, HBM bandwidth, LLC, ...) stay empty."""
    sid = _Strings()
    rows: dict[str, list[tuple]] = {t: [] for t in PROFILER_DB_TABLES}
    for table, values in ENUM_TABLES.items():
        rows[table] = sorted(values.items())
    corr_ids = {c.corr for c in p.op_calls}
    comm = communication_ops(p, collectives) if collectives else []
    _task_rows(p, rows, sid, corr_ids, {op.task: op.conn for op in comm})
    cann = [(a.start_ns, a.end_ns, _API_TYPE_ID["acl" if a.kind == "acl" else "node"], a.tid,
             a.corr if a.corr in corr_ids else None, sid[a.name]) for a in p.api_spans]
    op_type = _API_TYPE_ID["op"]
    api = [(w.start_ns, w.end_ns, w.tid, None, sid[f"ProfilerStep#{w.step}"], -1, 0, None, None, None, op_type)
           for w in p.steps]
    chains = rows["PYTORCH_CALLCHAINS"]
    for chain, c in enumerate(p.op_calls):
        api.append((c.start_ns, c.end_ns, c.tid, c.corr, sid[c.torch_name], -1, 0, sid[""], sid[""], chain, op_type))
        chains.append((chain, sid[c.call_stack], 0))
        rows["CONNECTION_IDS"].append((c.corr, c.corr))
    api.sort(key=lambda r: (r[0], -r[1], r[2]))
    rows["PYTORCH_API"] = with_depth(api, track=2)
    rows["connectionCats"] = [(c, "async_npu") for c in sorted({t.corr for t in p.tasks if t.op_call is not None})]
    rows["STEP_TIME"] = [(w.step, w.start_ns, w.end_ns) for w in p.step_windows]
    rows["RANK_DEVICE_MAP"] = [(rank, p.device_id)]
    _session_rows(p, rows)
    rows.update(memory_db_rows(p, sid))
    if comm:  # a job's rank: its strings come after the others', so the tables a single rank has keep their ids
        rows["COMMUNICATION_OP"], launches = communication_db_rows(p, comm, sid)
        cann.extend(launches)
        cann.sort(key=lambda r: (r[0], -r[1], r[3]))  # stable: a launch's AscendCL span encloses its Node span
    rows["CANN_API"] = with_depth(cann, track=3)
    rows["STRING_IDS"] = [(i, text) for text, i in sid.ids.items()]
    return rows


def _task_rows(p: AscendProfile, rows: dict[str, list[tuple]], sid: _Strings, corr_ids: set[int],
               comm_conn: dict[int, int] | None = None) -> None:
    """TASK (every shown task, nesting depth on its stream), COMPUTE_TASK_INFO and TASK_PMU_INFO (kernels);
    `comm_conn` gives a collective's task its op's connectionId."""
    task = []
    compute = rows["COMPUTE_TASK_INFO"]
    pmu_info = rows["TASK_PMU_INFO"]
    pmu_cells: dict[int, list] = {}  # by id of the (shared, frozen) split: its names' ids and values
    tensor_ids: dict[int, tuple] = {}  # by id of the tensor description: its six ids
    for gid, t in enumerate(p.tasks):
        conn_id = t.corr if t.corr in corr_ids else comm_conn.get(gid) if comm_conn else None
        tt = t.task_type
        task.append((t.start_ns, t.end_ns, t.device, conn_id, gid, 0, sid[RTS_TASK_TYPE.get(tt, tt)],
                     CONTEXT_ID_NONE, t.stream, t.task_id, MODEL_ID_NONE))
        if not t.is_kernel:
            continue
        ti = t.tensors
        mix = t.block_dim if tt in ("MIX_AIC", "MIX_AIV") else 0
        name, tt_id, op = sid[t.name], sid[tt], sid[t.op]
        tensors = tensor_ids.get(id(ti))
        if tensors is None:
            tensors = (sid[ti.get("input_formats", "")], sid[ti.get("input_data_types", "")],
                       sid[quoted_shape(ti.get("input_shapes", ""))], sid[ti.get("output_formats", "")],
                       sid[ti.get("output_data_types", "")], sid[quoted_shape(ti.get("output_shapes", ""))])
            if ti:  # a shared description (the empty default is a new dict per task)
                tensor_ids[id(ti)] = tensors
        compute.append((name, gid, t.block_dim, mix, tt_id, op) + tensors + (sid[""], t.wait_ns, sid["static"],
                                                                              sid["NO"]))
        cells = pmu_cells.get(id(t.pmu))
        if cells is None:
            cells = pmu_cells[id(t.pmu)] = _pmu_cells(t.pmu, sid)
        pmu_info.extend([(gid, n, v) for n, v in cells])
    rows["TASK"] = with_depth(task, track=8)


def _session_rows(p: AscendProfile, rows: dict[str, list[tuple]]) -> None:
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
    starts = np.fromiter(map(col(0), rows), dtype=np.int64, count=n)
    ends = np.fromiter(map(col(1), rows), dtype=np.int64, count=n)
    tracks = np.fromiter(map(col(track), rows), dtype=np.int64, count=n)
    order = np.lexsort((-ends, starts, tracks))  # stable: record order breaks ties
    depth = _depths(order, starts, ends, tracks).tolist()
    for i, d in enumerate(depth):  # in place: one table's rows held once
        rows[i] += (d,)
    return rows


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
        for table, rows in profiler_db_rows(p, rank, collectives).items():
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
