"""Stream the SQLite export of a torch_npu profile (``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db``).

Two selections, both streamed row by row from one read-only connection (bounded memory, whatever the size):

* ``iter_db_kernels``: the device kernels, ``COMPUTE_TASK_INFO`` joined with ``TASK`` on ``globalTaskId``,
  every string (op type, task type, name, shapes, dtypes, formats) resolved through ``STRING_IDS``, as the
  same ``KernelRecord``s ``read_kernels`` yields for kernel_details.csv (times from the exact integer
  nanoseconds of ``startNs`` / ``endNs``; ``row`` is the TASK rowid);
* ``iter_db_api_events``: the host ``CANN_API`` rows of type ``acl`` (``ENUM_API_TYPE``), as the same
  ``AclApiEvent``s trace_view.json's ``AscendCL@`` events give (phase1 / phase2 / runtime / tiling / other).

The cells follow the kernel tables' rules (shape and dtype spellings, ``N/A`` / NULL missing, HCCL and
tensor-less rows skipped and counted by reason). A file that is not an SQLite database (or is a
directory, a device, truncated or damaged), a missing table or column, and a value of the wrong type
(text where an integer belongs, a BLOB, a non-finite or beyond-1e20 number) raise ``ProfileFormatError``
naming the file, the table, the row and the column.
"""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterator

from opsim.errors import ProfileFormatError
from opsim.ingest.kernels import COMMUNICATION_CORES, MAX_MAGNITUDE, KernelRecord, _RowReader, _UnknownDtype, \
    canonical_core
from opsim.ingest.locate import check_regular_file
from opsim.ingest.trace_view import ACL_PREFIX, AclApiEvent, TraceEvent, classify_acl_name

EXPECTED = "ascend_pytorch_profiler_*.db (torch_npu's SQLite export)"
_MAGIC = b"SQLite format 3\x00"
#: CANN_API.type of AscendCL calls when the file has no ENUM_API_TYPE table (the value torch_npu writes).
ACL_API_TYPE = 20000
_BATCH = 512
_MAX_INT = int(MAX_MAGNITUDE)
#: parsed string columns are memoised by their string ids (kernels repeat signatures); cleared when this big.
_MEMO_LIMIT = 1 << 16

#: (table, column) the kernel selection needs; the optional ones read as NULL when absent.
_KERNEL_REQUIRED = {"TASK": ("globalTaskId", "startNs", "endNs"),
                    "COMPUTE_TASK_INFO": ("globalTaskId", "opType", "taskType"), "STRING_IDS": ("id", "value")}
_TASK_OPTIONAL = ("streamId", "taskId")
_INFO_OPTIONAL = ("blockDim", "mixBlockDim", "waitNs")
#: COMPUTE_TASK_INFO string-id column -> kernel_details key it fills.
_INFO_STRINGS = {"name": "name", "opType": "op_type", "taskType": "core", "inputShapes": "input_shapes",
                 "inputDataTypes": "input_dtypes", "inputFormats": "input_formats", "outputShapes": "output_shapes",
                 "outputDataTypes": "output_dtypes", "outputFormats": "output_formats"}
_TENSOR_STRINGS = ("inputShapes", "inputDataTypes", "outputShapes", "outputDataTypes")


class _DbRow(_RowReader):
    """A kernel row's string cells parsed with the kernel tables' rules; errors name the table and column."""

    def __init__(self, path: Path, row: int, cells: dict[str, str]):
        keys = list(cells)
        super().__init__(path, keys, {k: i for i, k in enumerate(keys)}, row, [cells[k] for k in keys])
        self.db_columns = {v: k for k, v in _INFO_STRINGS.items()}

    def fail(self, key: str, value: str, what: str) -> ProfileFormatError:
        return ProfileFormatError(
            f"{self.path}: table COMPUTE_TASK_INFO, row {self.row}, column "
            f"{self.db_columns.get(key, key)!r} (through STRING_IDS): {what} (got {value[:60]!r}); export the "
            f"profile again")


def _fail(path: Path, table: str, row: Any, column: str, what: str) -> ProfileFormatError:
    return ProfileFormatError(f"{path}: table {table}, row {row}, column {column!r}: {what}; export the profile "
                              f"again or drop the row")


def _int(path: Path, table: str, row: Any, column: str, value: Any) -> int | None:
    """An integer cell (SQLite may hold text or a real there): None for NULL, else exact and below 1e20."""
    if value is None:
        return None
    if type(value) is int:
        if -_MAX_INT <= value <= _MAX_INT:
            return value
        d = Decimal(value)
    elif isinstance(value, (float, str)):
        try:
            d = Decimal(value.strip() if isinstance(value, str) else value)
        except (InvalidOperation, ValueError):
            raise _fail(path, table, row, column, f"not an integer (got {str(value)[:40]!r})") from None
    else:
        raise _fail(path, table, row, column, f"not an integer (got a {type(value).__name__})")
    if not d.is_finite() or d.copy_abs() > MAX_MAGNITUDE or d != d.to_integral_value():
        raise _fail(path, table, row, column,
                    f"not a finite integer below {MAX_MAGNITUDE:.0e} (got {str(value)[:40]!r})")
    return int(d)


def _text(path: Path, table: str, row: Any, column: str, value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    raise _fail(path, table, row, column, f"not text (got a {type(value).__name__})")


@contextmanager
def _connect(path: str | Path, expected: str = EXPECTED) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A read-only connection to a checked SQLite file (magic bytes first: sqlite itself would take a
    non-database for an empty one); `expected` names the file in messages."""
    p = Path(path)
    size = check_regular_file(p, expected)
    with open(p, "rb") as f:
        magic = f.read(len(_MAGIC))
    if size < 100 or magic != _MAGIC:
        raise ProfileFormatError(f"{p}: not an SQLite database (its first bytes are {magic[:16]!r}); give an "
                                 f"{expected}")
    try:
        con = sqlite3.connect(p.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise ProfileFormatError(f"{p}: cannot open ({exc}); give an {expected}") from None
    try:
        yield p, con
    finally:
        con.close()


def _columns(p: Path, con: sqlite3.Connection, table: str) -> set[str]:
    try:
        cols = {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}
    except sqlite3.Error as exc:
        raise ProfileFormatError(f"{p}: table {table}: cannot read the schema ({exc}); the file is truncated or "
                                 f"damaged, export the profile again") from None
    if not cols:
        raise ProfileFormatError(f"{p}: table {table}: missing; an {EXPECTED} has it (was the profile exported "
                                 f"with export_type=db?)")
    return cols


def _require(p: Path, con: sqlite3.Connection, needed: dict[str, tuple[str, ...]]) -> dict[str, set[str]]:
    found = {}
    for table, cols in needed.items():
        have = _columns(p, con, table)
        missing = [c for c in cols if c not in have]
        if missing:
            raise ProfileFormatError(f"{p}: table {table}, column {missing[0]!r}: missing; export the profile "
                                     f"again with a torch_npu that writes it")
        found[table] = have
    return found


def _rows(p: Path, con: sqlite3.Connection, table: str, sql: str, args: tuple = ()) -> Iterator[tuple]:
    """The rows of one query, fetched in batches; sqlite errors (a damaged page) name the file and table."""
    try:
        cur = con.execute(sql, args)
        while True:
            batch = cur.fetchmany(_BATCH)
            if not batch:
                return
            yield from batch
            del batch  # the next batch is fetched without the last one alive
    except sqlite3.Error as exc:
        raise ProfileFormatError(f"{p}: table {table}: cannot read ({exc}); the file is truncated or damaged, "
                                 f"export the profile again") from None


def _kernel_sql(cols: dict[str, set[str]]) -> str:
    task = [f"t.{c}" if c in cols["TASK"] else "NULL" for c in _TASK_OPTIONAL]
    info = [f"c.{c}" if c in cols["COMPUTE_TASK_INFO"] else "NULL" for c in _INFO_OPTIONAL]
    strings, joins = [], []
    for i, c in enumerate(_INFO_STRINGS):
        if c in cols["COMPUTE_TASK_INFO"]:
            strings += [f"c.{c}", f"s{i}.value"]
            joins.append(f"LEFT JOIN STRING_IDS s{i} ON s{i}.id = c.{c}")
        else:
            strings += ["NULL", "NULL"]
    # CROSS JOIN keeps TASK the outer loop: rows come in TASK order, nothing is sorted or held
    return (f"SELECT t.rowid, t.startNs, t.endNs, c.rowid, {', '.join(task + info + strings)} FROM TASK t CROSS JOIN "
            f"COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId {' '.join(joins)}")


def iter_db_kernels(path: str | Path, skipped: dict[str, int] | None = None, *,
                    shapeless: bool = False) -> Iterator[KernelRecord]:
    """The device kernels of a profiler db in TASK order; skipped rows are counted in `skipped` by reason.
    `shapeless` keeps the kernels without shapes (an import joins them to its trace), as read_kernels does."""
    with _connect(path) as (p, con):
        cols = _require(p, con, _KERNEL_REQUIRED)
        has_tensors = any(c in cols["COMPUTE_TASK_INFO"] for c in _TENSOR_STRINGS)
        memo: dict = {}
        for r in _rows(p, con, "COMPUTE_TASK_INFO", _kernel_sql(cols)):
            rec, reason = _kernel(p, r, has_tensors, memo, shapeless)
            if rec is None:
                if skipped is not None:
                    skipped[reason] = skipped.get(reason, 0) + 1
                continue
            yield rec


def _strings(p: Path, info: int, r: tuple, has_tensors: bool, shapeless: bool = False) -> tuple | str:
    """The string columns of a kernel row parsed (name, op type, core, shapes, dtypes, formats), or the
    reason the row is skipped."""
    cells: dict[str, str] = {}
    for i, key in enumerate(_INFO_STRINGS.values()):
        text = _text(p, "STRING_IDS", r[9 + 2 * i], "value", r[10 + 2 * i])
        cells[key] = "N/A" if text is None else text
    row = _DbRow(p, info, cells)
    op_type, core_text = row.raw("op_type"), row.raw("core")
    if op_type is None or core_text is None:
        return "no op type or accelerator core"
    core = canonical_core(core_text)
    if core in COMMUNICATION_CORES:
        return f"{core} (communication)"
    in_shapes = out_shapes = ()
    if has_tensors:
        in_shapes, out_shapes = row.shapes("input_shapes"), row.shapes("output_shapes")
        if in_shapes is None and out_shapes is None and not shapeless:
            return "no shapes"
    try:
        in_dtypes, out_dtypes = row.dtypes("input_dtypes"), row.dtypes("output_dtypes")
    except _UnknownDtype as exc:
        return f"unknown data type {str(exc)[:40]!r}"
    if not in_shapes and in_dtypes == ("undefined",):
        in_dtypes = ()
    if not out_shapes and out_dtypes == ("undefined",):
        out_dtypes = ()
    return (row.raw("name") or op_type, op_type, core, in_shapes or (), in_dtypes, out_shapes or (), out_dtypes,
            row.words("input_formats"), row.words("output_formats"))


def _kernel(p: Path, r: tuple, has_tensors: bool, memo: dict, shapeless: bool = False
            ) -> tuple[KernelRecord | None, str]:
    rowid, info = r[0], r[3]
    start = _int(p, "TASK", rowid, "startNs", r[1])
    end = _int(p, "TASK", rowid, "endNs", r[2])
    stream = _int(p, "TASK", rowid, "streamId", r[4])
    task_id = _int(p, "TASK", rowid, "taskId", r[5])
    block_dim = _int(p, "COMPUTE_TASK_INFO", info, "blockDim", r[6])
    mix = _int(p, "COMPUTE_TASK_INFO", info, "mixBlockDim", r[7])
    wait = _int(p, "COMPUTE_TASK_INFO", info, "waitNs", r[8])
    ids = r[9::2]
    parsed = memo.get(ids)
    if parsed is None:
        for col, sid in zip(_INFO_STRINGS, ids):
            _int(p, "COMPUTE_TASK_INFO", info, col, sid)
        parsed = _strings(p, info, r, has_tensors, shapeless)
        if len(memo) >= _MEMO_LIMIT:
            memo.clear()
        memo[ids] = parsed
    if isinstance(parsed, str):
        return None, parsed
    name, op_type, core, in_shapes, in_dtypes, out_shapes, out_dtypes, in_formats, out_formats = parsed
    dur_ns = end - start if start is not None and end is not None else None
    return KernelRecord(
        source=str(p), row=rowid, name=name, op_type=op_type, core=core,
        block_dim=block_dim or 0, input_shapes=in_shapes, input_dtypes=in_dtypes,
        output_shapes=out_shapes, output_dtypes=out_dtypes, input_formats=in_formats,
        output_formats=out_formats, start_us=None if start is None else start / 1000.0,
        start_ns=start, duration_us=None if dur_ns is None else dur_ns / 1000.0,
        wait_us=None if wait is None else wait / 1000.0, mix_block_dim=mix or 0, stream_id=stream,
        task_id=task_id), ""


def _acl_type(p: Path, con: sqlite3.Connection) -> int:
    """CANN_API.type of AscendCL calls: ENUM_API_TYPE's 'acl' id when the table exists, else 20000."""
    try:
        found = con.execute("SELECT id FROM ENUM_API_TYPE WHERE name = 'acl'").fetchone()
    except sqlite3.Error:
        return ACL_API_TYPE
    value = _int(p, "ENUM_API_TYPE", "name 'acl'", "id", found[0]) if found else None
    return ACL_API_TYPE if value is None else value


def iter_db_api_events(path: str | Path, skipped: dict[str, int] | None = None) -> Iterator[AclApiEvent]:
    """The AscendCL host calls of ``CANN_API`` (type acl) in table order, as trace_view's AclApiEvents: the
    event's ``index`` is the rowid - 1, ``tid`` the globalTid, ``ts`` / ``dur`` exact nanoseconds."""
    with _connect(path) as (p, con):
        cols = _require(p, con, {"CANN_API": ("startNs", "endNs", "name"), "STRING_IDS": ("id", "value")})["CANN_API"]
        tid = "a.globalTid" if "globalTid" in cols else "NULL"
        where = "WHERE a.type = ?" if "type" in cols else ""
        args = (_acl_type(p, con),) if where else ()
        sql = (f"SELECT a.rowid, a.startNs, a.endNs, {tid}, a.name, s.value FROM CANN_API a "
               f"LEFT JOIN STRING_IDS s ON s.id = a.name {where}")
        for r in _rows(p, con, "CANN_API", sql, args):
            ev = _api_event(p, r)
            if isinstance(ev, str):
                if skipped is not None:
                    skipped[ev] = skipped.get(ev, 0) + 1
                continue
            yield ev


def _api_event(p: Path, r: tuple) -> AclApiEvent | str:
    rowid = r[0]
    start = _int(p, "CANN_API", rowid, "startNs", r[1])
    end = _int(p, "CANN_API", rowid, "endNs", r[2])
    tid = _int(p, "CANN_API", rowid, "globalTid", r[3])
    _int(p, "CANN_API", rowid, "name", r[4])
    name = _text(p, "STRING_IDS", r[4], "value", r[5])
    if name is None or not name.strip():
        return "no API name"
    if start is None or end is None:
        return "no start or end time"
    if end < start:
        raise _fail(p, "CANN_API", rowid, "endNs", f"ends before it starts ({end} < {start})")
    api, kind = classify_acl_name(name)
    ev = TraceEvent(name=ACL_PREFIX + name, pid=0, tid=tid if tid is not None else 0, ts=start, dur=end - start,
                    cat="CANN_API", index=rowid - 1)
    return AclApiEvent(event=ev, api=api, kind=kind)


def db_launch_counts(path: str | Path) -> dict[int, int]:
    """CANN_API rowid of each AscendCL call -> the device tasks launched inside it: TASK rows whose
    connectionId is that of a CANN_API event (a node ``launch``, or the call itself) lying within the call's
    time on its thread. One pass over CANN_API sorted per thread; memory grows with the calls, not the tasks."""
    with _connect(path) as (p, con):
        _require(p, con, {"CANN_API": ("startNs", "endNs", "connectionId", "globalTid"),
                          "TASK": ("connectionId",)})
        tasks: dict[int, int] = {}
        for conn, n in _rows(p, con, "TASK", "SELECT connectionId, COUNT(*) FROM TASK GROUP BY connectionId"):
            if conn is not None:
                tasks[_int(p, "TASK", f"connectionId {conn}", "connectionId", conn)] = n
        acl = _acl_type(p, con)
        sql = ("SELECT rowid, startNs, endNs, globalTid, connectionId, type FROM CANN_API "
               "ORDER BY globalTid, startNs, endNs DESC")
        counts: dict[int, int] = {}
        open_calls: list[tuple[int, int]] = []  # (end, rowid) of the AscendCL calls enclosing the current event
        tid_now = None
        for rowid, start, end, tid, conn, typ in _rows(p, con, "CANN_API", sql):
            start = _int(p, "CANN_API", rowid, "startNs", start)
            end = _int(p, "CANN_API", rowid, "endNs", end)
            if start is None or end is None:
                continue
            if tid != tid_now:
                open_calls, tid_now = [], tid
            while open_calls and open_calls[-1][0] < start:
                open_calls.pop()
            n = tasks.get(conn, 0) if conn is not None else 0
            if typ == acl:
                counts[rowid] = n
                open_calls.append((end, rowid))
            if n:
                for call_end, call in open_calls[:-1] if typ == acl else open_calls:
                    if end <= call_end:
                        counts[call] += n
        return counts


__all__ = ["ACL_API_TYPE", "db_launch_counts", "iter_db_api_events", "iter_db_kernels"]
