"""The communication tables of torch_npu's db export (``analysis.db``) as comm_read's records.

``CommAnalyzerTime`` (one row per op: ``hccl_op_name``, ``group_name`` = the group hash, ``transit_time``,
``wait_time``, ``idle_time`` in ms), ``CommAnalyzerBandwidth`` (per op and transport: ``transit_size`` MB,
``transit_time`` ms, and one row per message size: ``package_size`` MB, ``count``, ``total_duration`` ms) and
``CommAnalyzerMatrix`` (per op and link: ``src_rank``, ``dst_rank``) hold what communication.json and
communication_matrix.json hold for the text export; a job import of db rank folders reads them. Streamed from a
read-only connection; a damaged file, a missing table or column, or a value that is no finite non-negative number
below 1e20 is refused naming the file, the table, the row and the column.
"""
from __future__ import annotations

import math
from pathlib import Path

from opsim.calibration.comm_read import SKIPPED_TRANSPORTS, CommOp, Transport
from opsim.ingest.profiler_db import _connect, _fail, _require, _rows

EXPECTED = "analysis.db (torch_npu's db export)"
_MAX = 1e20


def _ms(p: Path, table: str, row: int, column: str, value: object) -> float | None:
    """A time or size cell: None for NULL, else a finite non-negative number below 1e20."""
    if value is None:
        return None
    try:
        x = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else math.nan
    except ValueError:
        x = math.nan
    if not math.isfinite(x) or not 0 <= x < _MAX:
        raise _fail(p, table, row, column, f"not a finite non-negative number (got {str(value)[:40]!r})")
    return x


def _text(p: Path, table: str, row: int, column: str, value: object) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool) or "\x00" in str(value) or len(str(value)) > 256:
        raise _fail(p, table, row, column, f"not a name (got {str(value)[:40]!r})")
    return str(value)


def read_communication_db(path: str | Path) -> list[CommOp]:
    """The ops of an analysis.db (CommAnalyzerTime with CommAnalyzerBandwidth's transports)."""
    with _connect(path, EXPECTED) as (p, con):
        _require(p, con, {"CommAnalyzerTime": ("hccl_op_name", "group_name", "transit_time", "wait_time",
                                               "idle_time", "step", "type"),
                          "CommAnalyzerBandwidth": ("hccl_op_name", "group_name", "transport_type", "transit_size",
                                                    "transit_time", "package_size", "count", "total_duration")})
        transports: dict[tuple[str, str], dict[str, tuple[float, float, list]]] = {}
        sql = ("SELECT rowid, hccl_op_name, group_name, transport_type, transit_size, transit_time, package_size, "
               "count, total_duration FROM CommAnalyzerBandwidth")
        t = "CommAnalyzerBandwidth"
        for row, op, group, tr, size, time, pkg, count, total in _rows(p, con, t, sql):
            tr = _text(p, t, row, "transport_type", tr)
            if tr in SKIPPED_TRANSPORTS:
                continue
            key = (_text(p, t, row, "hccl_op_name", op), _text(p, t, row, "group_name", group))
            entry = transports.setdefault(key, {}).setdefault(
                tr, (_ms(p, t, row, "transit_size", size) or 0.0, _ms(p, t, row, "transit_time", time) or 0.0, []))
            n = _ms(p, t, row, "count", count) or 0.0
            if n:
                entry[2].append((_ms(p, t, row, "package_size", pkg) or 0.0, int(n),
                                 _ms(p, t, row, "total_duration", total) or 0.0))
        ops = []
        t = "CommAnalyzerTime"
        sql = ("SELECT rowid, hccl_op_name, group_name, transit_time, wait_time, idle_time, step, type FROM "
               "CommAnalyzerTime")
        for row, op, group, transit, wait, idle, step, kind in _rows(p, con, t, sql):
            name, ghash = _text(p, t, row, "hccl_op_name", op), _text(p, t, row, "group_name", group)
            us = [None if v is None else v * 1000.0 for v in (_ms(p, t, row, "transit_time", transit),
                                                             _ms(p, t, row, "wait_time", wait),
                                                             _ms(p, t, row, "idle_time", idle))]
            trs = {k: Transport(size_mb=a, time_ms=b, buckets=tuple(c))
                   for k, (a, b, c) in transports.get((name, ghash), {}).items()}
            ops.append(CommOp(file=str(p), step=str(step or ""), kind=str(kind or "collective"), name=name,
                              transit_us=us[0], wait_us=us[1], idle_us=us[2], transports=trs, group_hash=ghash))
        return ops


def read_groups_db(path: str | Path) -> dict[str, set[int]]:
    """Group hash -> every rank its links name (CommAnalyzerMatrix's src_rank / dst_rank)."""
    with _connect(path, EXPECTED) as (p, con):
        _require(p, con, {"CommAnalyzerMatrix": ("group_name", "src_rank", "dst_rank")})
        out: dict[str, set[int]] = {}
        t = "CommAnalyzerMatrix"
        for row, group, src, dst in _rows(p, con, t, f"SELECT rowid, group_name, src_rank, dst_rank FROM {t}"):
            members = out.setdefault(_text(p, t, row, "group_name", group), set())
            for column, v in (("src_rank", src), ("dst_rank", dst)):
                text = str(v)
                if isinstance(v, bool) or not text.isdigit() or len(text) > 9:
                    raise _fail(p, t, row, column, f"not a rank (got {text[:40]!r})")
                members.add(int(text))
        return out


__all__ = ["read_communication_db", "read_groups_db"]
