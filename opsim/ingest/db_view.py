"""torch_npu's SQLite export (``ascend_pytorch_profiler_*.db``) as the TraceView a trace_view.json gives.

`opsim import` interprets one form of a profile, `TraceView`; this module builds it from the db's tables so the
db export of a run imports as its text export does. What trace_view.json shows, the db holds as rows:

* ``PYTORCH_API`` (types ``op`` and ``queue`` of ``ENUM_API_TYPE``): the framework ops, ``ProfilerStep#N`` and
  torch_npu's ``Enqueue`` / ``Dequeue@X`` on the host process (``globalTid`` = pid << 32 | tid); a queue row's
  ``connectionId`` names its ``CONNECTION_IDS`` row, whose connection id is the pair's ``correlation_id``;
* ``CANN_API``: the CANN process's events (``AscendCL@``, ``Node@``, ``Hccl@`` by type) with their
  ``connection_id``;
* ``TASK``: the "Ascend Hardware" rows, one ``Stream N`` row per stream, named by ``COMPUTE_TASK_INFO.name``
  (kernels) or by the task type (``EVENT_RECORD``, ``MEMCPY_ASYNC``, ``Notify Wait``, ...); ``Task Type`` is
  the kernel's core, or the SQE type trace_view.json gives (``RTS_TASK_TYPE`` read backwards);
* a TASK row's ``connectionId`` equals that of the CANN_API event that launched it (the latest-starting one
  when several share it, as opsim's own export writes): the HostToDevice flow from that event's start to the
  task's; a framework op's ``CONNECTION_IDS`` reaching a task: its torch_to_npu flow;
* ``COMMUNICATION_OP``: the HCCL ops on the "HCCL" process (name, ``data_type``, ``count``, ``alg_type``).

Only what the importer reads becomes an event: the framework ops other than ``ProfilerStep#N`` and the CANN
``Node@`` / ``Hccl@`` rows only start flows. Every query is streamed from one read-only connection in batches
(`opsim.ingest.profiler_db`); memory grows with the events kept, as reading trace_view.json does. Damage (not SQLite, truncated, a missing table or column, a
wrong-typed or beyond-1e20 value, a NUL in a name) raises ProfileFormatError naming the file, table, row and
column.
"""
from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable

from opsim.errors import ProfileFormatError
from opsim.ingest.profiler_db import _connect, _fail, _int, _require, _rows, _text
from opsim.ingest.trace_view import DEVICE_PROCESS, LAUNCH_FLOW, FlowPair, FlowPoint, TraceEvent, TraceView

CANN_PID = "CANN"
DEVICE_PID = "Ascend Hardware"
HCCL_PID = "HCCL"
_PREFIX = {"acl": "AscendCL@", "node": "Node@", "hccl": "Hccl@", "runtime": "Runtime@", "model": "Model@"}
"""ENUM_API_TYPE name of a CANN_API row -> the prefix trace_view.json gives its event."""
_DEFAULT_TYPES = {5000: "runtime", 5500: "hccl", 10000: "node", 15000: "model", 20000: "acl", 50001: "op",
                  50002: "queue", 50003: "trace", 50004: "mstx"}
"""ENUM_API_TYPE as torch_npu writes it (used when the table is absent)."""
SQE_OF_TASK = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AIVEC": "AI_VECTOR_CORE", "KERNEL_AICPU": "AI_CPU",
               "KERNEL_MIX_AIC": "MIX_AIC", "KERNEL_MIX_AIV": "MIX_AIV", "EVENT_RECORD": "EVENT_RECORD_SQE",
               "EVENT_WAIT": "EVENT_WAIT_SQE", "MEMCPY_ASYNC": "SDMA_SQE", "PROFILING_ENABLE": "PLACE_HOLDER_SQE",
               "PROFILING_DISABLE": "PLACE_HOLDER_SQE"}
"""TASK.taskType (the runtime's type) -> the ``Task Type`` trace_view.json shows; a kernel's own core
(COMPUTE_TASK_INFO.taskType) wins. MEMCPY_ASYNC is a copy engine task (PCIE_DMA_SQE or SDMA_SQE in the text
export, told apart only there; opsim replays both alike); the profiling markers are place holders there."""
FRAMEWORK_FLOW = "async_npu"
HCCL_OP_TASK = "TASK row of an HCCL op itself (its sub-tasks are replayed; the op is COMMUNICATION_OP's)"
_TID_BITS = 32
_MAX_NAME = 4096


class _Ctx:
    """One read: the file, its connection, the interned names, the events and flows gathered."""

    def __init__(self, path: Path, con: sqlite3.Connection):
        self.path, self.con = path, con
        self.events: list[TraceEvent] = []
        self.flows: list[FlowPair] = []
        self.names: dict[str, str] = {}
        self.thread_names: dict[tuple, str] = {}
        self.types = _api_types(path, con)
        self.skipped: dict[str, int] = {}

    def name(self, table: str, row: Any, column: str, value: Any) -> str | None:
        text = _text(self.path, "STRING_IDS", f"of {table} row {row}", "value", value)
        if text is None:
            return None
        if "\x00" in text or len(text) > _MAX_NAME:
            raise _fail(self.path, table, row, column, "a name with a NUL byte or longer than "
                        f"{_MAX_NAME} characters (through STRING_IDS)")
        return self.names.setdefault(text, text)

    def add(self, name: str, pid: Any, tid: Any, ts: int, end: int, table: str, row: Any, args: dict) -> None:
        if end < ts:
            raise _fail(self.path, table, row, "endNs", f"ends before it starts ({end} < {ts})")
        self.events.append(TraceEvent(name=name, pid=pid, tid=tid, ts=ts, dur=end - ts, args=args,
                                      index=len(self.events)))


def _api_types(p: Path, con: sqlite3.Connection) -> dict[str, int]:
    """ENUM_API_TYPE name -> id (torch_npu's values when the table is absent)."""
    try:
        rows = con.execute("SELECT id, name FROM ENUM_API_TYPE").fetchmany(1000)
    except sqlite3.Error:
        rows = list(_DEFAULT_TYPES.items())
    out = {}
    for i, name in rows:
        if isinstance(name, str):
            out[name] = _int(p, "ENUM_API_TYPE", f"name {name[:20]!r}", "id", i)
    return out or {v: k for k, v in _DEFAULT_TYPES.items()}


def _split_tid(p: Path, table: str, row: Any, value: Any) -> tuple[int, int]:
    """(pid, tid) of a globalTid (pid << 32 | tid); a plain thread id has pid 0."""
    g = _int(p, table, row, "globalTid", value)
    if g is None or g < 0:
        raise _fail(p, table, row, "globalTid", f"not a thread id (got {str(value)[:40]!r})")
    return g >> _TID_BITS, g & ((1 << _TID_BITS) - 1)


def _has_table(con: sqlite3.Connection, table: str) -> bool:
    try:
        return con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                           (table,)).fetchone() is not None
    except sqlite3.Error:
        return False


def _pytorch(c: _Ctx) -> None:
    """The steps and the task queue's Enqueue / Dequeue (PYTORCH_API types op and queue; the other framework ops
    only start torch_to_npu flows, see `_framework_flows`)."""
    if not _has_table(c.con, "PYTORCH_API"):
        return
    p = c.path
    cols = _require(p, c.con, {"PYTORCH_API": ("startNs", "endNs", "globalTid", "name", "type")})["PYTORCH_API"]
    op, queue = c.types.get("op", 50001), c.types.get("queue", 50002)
    conn = "p.connectionId" if "connectionId" in cols else "NULL"
    queued = _has_table(c.con, "CONNECTION_IDS") and conn != "NULL"
    join = (f"LEFT JOIN CONNECTION_IDS c ON c.id = p.connectionId AND p.type = {queue:d}" if queued else "")
    corr = "c.connectionId" if queued else conn
    sql = (f"SELECT p.rowid, p.startNs, p.endNs, p.globalTid, p.type, s.value, {corr}, p.name FROM PYTORCH_API p "
           f"LEFT JOIN STRING_IDS s ON s.id = p.name {join} "
           f"WHERE p.type = {queue:d} OR (p.type = {op:d} AND s.value LIKE 'ProfilerStep#%')")
    hosts = set()
    for rowid, start, end, gtid, typ, name, cid, name_id in _rows(p, c.con, "PYTORCH_API", sql):
        span = _named_span(c, "PYTORCH_API", rowid, name_id, name, start, end)
        if span is None:
            continue
        text, ts, te = span
        pid, tid = _split_tid(p, "PYTORCH_API", rowid, gtid)
        args: dict = {}
        if typ == queue:
            corr_id = _int(p, "CONNECTION_IDS" if queued else "PYTORCH_API", rowid, "connectionId", cid)
            if corr_id is not None:
                args = {"correlation_id": corr_id}
        c.add(text, pid, tid, ts, te, "PYTORCH_API", rowid, args)
        if (pid, tid) not in hosts:
            hosts.add((pid, tid))
            c.thread_names[(pid, tid)] = f"Thread {tid}"
    if queued:
        _framework_flows(c, op)


def _named_span(c: _Ctx, table: str, rowid: int, name_id: Any, name: Any, start: Any,
                end: Any) -> tuple[str, int, int] | None:
    """A host row's (name, startNs, endNs), each checked; None for a row without a name or a time."""
    _int(c.path, table, rowid, "name", name_id)
    text = c.name(table, rowid, "name", name)
    ts, te = _int(c.path, table, rowid, "startNs", start), _int(c.path, table, rowid, "endNs", end)
    return (text, ts, te) if text and ts is not None and te is not None else None


def _framework_flows(c: _Ctx, op: int) -> None:
    """torch_to_npu flows: a framework op's CONNECTION_IDS that a TASK row carries (op start -> task start); none
    to an HCCL sub-task (torch_npu draws it to the HCCL op)."""
    p = c.path
    cols = _require(p, c.con, {"TASK": ("startNs", "streamId")})["TASK"]
    if "connectionId" not in cols:
        return
    hccl = ""
    if _has_table(c.con, "COMMUNICATION_TASK_INFO") and "globalTaskId" in cols:
        _require(p, c.con, {"COMMUNICATION_TASK_INFO": ("globalTaskId",)})
        hccl = "AND t.globalTaskId NOT IN (SELECT globalTaskId FROM COMMUNICATION_TASK_INFO)"
    sql = ("SELECT p.rowid, p.globalTid, p.startNs, t.rowid, t.streamId, t.startNs, c.connectionId FROM PYTORCH_API p "
           "JOIN CONNECTION_IDS c ON c.id = p.connectionId JOIN TASK t ON t.connectionId = c.connectionId "
           f"WHERE p.type = {op:d} {hccl}")
    for prow, gtid, pstart, trow, stream, tstart, cid in _rows(p, c.con, "CONNECTION_IDS", sql):
        pid, tid = _split_tid(p, "PYTORCH_API", prow, gtid)
        ts = _int(p, "PYTORCH_API", prow, "startNs", pstart)
        sid, te = _int(p, "TASK", trow, "streamId", stream), _int(p, "TASK", trow, "startNs", tstart)
        if ts is None or te is None:
            continue
        c.flows.append(FlowPair(cat=FRAMEWORK_FLOW, id=str(cid), name="torch_to_npu",
                                start=FlowPoint(pid, tid, ts), end=FlowPoint(DEVICE_PID, sid or 0, te)))


def _cann(c: _Ctx) -> None:
    """The CANN process's AscendCL events (CANN_API rows of type acl), each with its connection_id (the node and
    HCCL rows only start flows, see `_tasks`)."""
    p = c.path
    _require(p, c.con, {"CANN_API": ("startNs", "endNs", "type", "globalTid", "connectionId", "name")})
    prefix = {i: _PREFIX[n] for n, i in c.types.items() if n in _PREFIX}
    sql = ("SELECT a.rowid, a.startNs, a.endNs, a.type, a.globalTid, a.connectionId, a.name, s.value FROM CANN_API a "
           f"LEFT JOIN STRING_IDS s ON s.id = a.name WHERE a.type = {c.types.get('acl', 20000):d}")
    for rowid, start, end, typ, gtid, cid, name_id, name in _rows(p, c.con, "CANN_API", sql):
        span = _named_span(c, "CANN_API", rowid, name_id, name, start, end)
        if span is None:
            continue
        text, ts, te = span
        _pid, tid = _split_tid(p, "CANN_API", rowid, gtid)
        conn = _int(p, "CANN_API", rowid, "connectionId", cid)
        t = _int(p, "CANN_API", rowid, "type", typ)
        c.add(prefix.get(t, "") + text, CANN_PID, tid, ts, te, "CANN_API", rowid,
              {} if conn is None else {"connection_id": conn})
        c.thread_names.setdefault((CANN_PID, tid), f"Thread {tid}")


def _task_sql(c: _Ctx) -> str:
    cols = _require(c.path, c.con, {"TASK": ("startNs", "endNs", "streamId", "taskType", "connectionId")})["TASK"]
    task_id = "t.taskId" if "taskId" in cols else "NULL"
    info = ("LEFT JOIN COMPUTE_TASK_INFO ci ON ci.globalTaskId = t.globalTaskId "
            "LEFT JOIN STRING_IDS cn ON cn.id = ci.name LEFT JOIN STRING_IDS cc ON cc.id = ci.taskType")
    kernel = "cn.value, cc.value"
    if not _has_table(c.con, "COMPUTE_TASK_INFO") or "globalTaskId" not in cols:
        info, kernel = "", "NULL, NULL"
    else:
        _require(c.path, c.con, {"COMPUTE_TASK_INFO": ("globalTaskId", "name", "taskType")})
    comm, hccl = "NULL, NULL", ""
    if _has_table(c.con, "COMMUNICATION_TASK_INFO") and "globalTaskId" in cols:
        _require(c.path, c.con, {"COMMUNICATION_TASK_INFO": ("globalTaskId",)})
        comm = "m.g, h.k" if task_id != "NULL" else "m.g, NULL"
        hccl = ("LEFT JOIN (SELECT DISTINCT globalTaskId AS g FROM COMMUNICATION_TASK_INFO) m "
                "ON m.g = t.globalTaskId")
        if task_id != "NULL":  # the (stream, task id) of HCCL sub-tasks: that of their op's own task too
            hccl += (" LEFT JOIN (SELECT DISTINCT t2.streamId AS s, t2.taskId AS k FROM TASK t2 JOIN "
                     "COMMUNICATION_TASK_INFO m2 ON m2.globalTaskId = t2.globalTaskId) h ON h.s = t.streamId "
                     "AND h.k = t.taskId")
    return (f"SELECT t.rowid, t.startNs, t.endNs, t.streamId, {task_id}, t.connectionId, t.taskType, s.value, "
            f"{kernel}, a.globalTid, a.startNs, {comm} FROM TASK t LEFT JOIN STRING_IDS s ON s.id = t.taskType "
            f"{info} {hccl} LEFT JOIN (SELECT connectionId AS cid, globalTid, MAX(startNs) AS startNs FROM CANN_API "
            f"WHERE connectionId IS NOT NULL GROUP BY connectionId) a ON a.cid = t.connectionId")


def _tasks(c: _Ctx) -> None:
    """The device rows (TASK) and the HostToDevice flow of each task from the CANN_API event launching it (none
    to an HCCL sub-task, one with a COMMUNICATION_TASK_INFO row: torch_npu draws its flow to the HCCL op)."""
    p = c.path
    for row in _rows(p, c.con, "TASK", _task_sql(c)):
        rowid, start, end, stream, task_id, cid, type_id, rts_type, kname, core, gtid, host_start, comm, op = row
        if op is not None and comm is None and kname is None and rts_type not in SQE_OF_TASK:
            # the HCCL op's own task (its sub-tasks' stream and task id, spanning them; no kernel, event, copy or
            # marker, whose task ids may recur once they wrap): the text export shows it as the op on the HCCL
            # process, not on its stream
            c.skipped[HCCL_OP_TASK] = c.skipped.get(HCCL_OP_TASK, 0) + 1
            continue
        ts, te = _int(p, "TASK", rowid, "startNs", start), _int(p, "TASK", rowid, "endNs", end)
        sid = _int(p, "TASK", rowid, "streamId", stream)
        if ts is None or te is None or sid is None:
            continue
        _int(p, "TASK", rowid, "taskType", type_id)
        rts = c.name("TASK", rowid, "taskType", rts_type) or ""
        kernel = c.name("COMPUTE_TASK_INFO", f"of TASK row {rowid}", "name", kname)
        core = c.name("COMPUTE_TASK_INFO", f"of TASK row {rowid}", "taskType", core)
        args: dict = {"Task Type": core or SQE_OF_TASK.get(rts, rts), "Stream Id": sid}
        tid_ = _int(p, "TASK", rowid, "taskId", task_id)
        if tid_ is not None:
            args["Task Id"] = tid_
        conn = _int(p, "TASK", rowid, "connectionId", cid)
        if conn is not None:
            args["connection_id"] = conn
        c.add(kernel or rts or "task", DEVICE_PID, sid, ts, te, "TASK", rowid, args)
        c.thread_names.setdefault((DEVICE_PID, sid), f"Stream {sid}")
        hs = _int(p, "CANN_API", f"connectionId {conn}", "startNs", host_start)
        if hs is not None and conn is not None and comm is None:
            _pid, htid = _split_tid(p, "CANN_API", f"connectionId {conn}", gtid)
            c.flows.append(FlowPair(cat=LAUNCH_FLOW, id=str(conn), name=f"HostToDevice{conn}",
                                    start=FlowPoint(CANN_PID, htid, hs), end=FlowPoint(DEVICE_PID, sid, ts)))


def _hccl_ops(c: _Ctx) -> None:
    """COMMUNICATION_OP rows as the HCCL process's op events (a job import makes them collective steps)."""
    if not _has_table(c.con, "COMMUNICATION_OP"):
        return
    p = c.path
    cols = _require(p, c.con, {"COMMUNICATION_OP": ("opName", "startNs", "endNs")})["COMMUNICATION_OP"]
    dtypes = "LEFT JOIN ENUM_HCCL_DATA_TYPE d ON d.id = o.dataType" if (
        _has_table(c.con, "ENUM_HCCL_DATA_TYPE") and "dataType" in cols) else ""
    sql = (f"SELECT o.rowid, o.opName, n.value, o.startNs, o.endNs, {'d.name' if dtypes else 'NULL'}, "
           f"{'o.count' if 'count' in cols else 'NULL'}, {'g.value' if 'algType' in cols else 'NULL'}, "
           f"{'o.connectionId' if 'connectionId' in cols else 'NULL'} FROM COMMUNICATION_OP o "
           f"LEFT JOIN STRING_IDS n ON n.id = o.opName {dtypes} "
           f"{'LEFT JOIN STRING_IDS g ON g.id = o.algType' if 'algType' in cols else ''}")
    for rowid, name_id, name, start, end, dtype, count, alg, cid in _rows(p, c.con, "COMMUNICATION_OP", sql):
        _int(p, "COMMUNICATION_OP", rowid, "opName", name_id)
        text = c.name("COMMUNICATION_OP", rowid, "opName", name)
        ts, te = _int(p, "COMMUNICATION_OP", rowid, "startNs", start), _int(p, "COMMUNICATION_OP", rowid, "endNs", end)
        if not text or ts is None or te is None:
            continue
        args: dict = {"count": _int(p, "COMMUNICATION_OP", rowid, "count", count)}
        if isinstance(dtype, str):
            args["data_type"] = dtype
        if isinstance(alg, str):
            args["alg_type"] = alg
        conn = _int(p, "COMMUNICATION_OP", rowid, "connectionId", cid)
        if conn is not None:
            args["connection_id"] = conn
        c.add(text, HCCL_PID, 0, ts, te, "COMMUNICATION_OP", rowid, args)
        c.thread_names.setdefault((HCCL_PID, 0), "Group 0 Communication")


def read_db_view(path: str | Path, progress: Callable[[int, int], None] | None = None) -> TraceView:
    """The TraceView of a profiler db (see the module docstring); `progress(done, total)` counts tables."""
    with _connect(path) as (p, con):
        c = _Ctx(p, con)
        _require(p, con, {"STRING_IDS": ("id", "value")})
        steps = (_pytorch, _cann, _tasks, _hccl_ops)
        for n, step in enumerate(steps):
            step(c)
            if progress is not None:
                progress(n + 1, len(steps))
    if not c.events:
        raise ProfileFormatError(f"{p}: no host or device event in PYTORCH_API, CANN_API or TASK; export the "
                                 f"profile again with the NPU activity")
    return TraceView(path=p, events=c.events, flows=c.flows,
                     process_names={DEVICE_PID: DEVICE_PROCESS, CANN_PID: "CANN", HCCL_PID: "HCCL"},
                     thread_names=c.thread_names, skipped=c.skipped)


__all__ = ["read_db_view", "SQE_OF_TASK"]
