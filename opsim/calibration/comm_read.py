"""Reading torch_npu's communication.json and communication_matrix.json, checked field by field.

communication.json: ``{step: {"collective" | "p2p": {"<op name>@<group hash>": {"Communication Time Info":
{"Transit Time(ms)", "Wait Time(ms)", ...}, "Communication Bandwidth Info": {transport: {"Transit Size(MB)",
"Transit Time(ms)", "Bandwidth(GB/s)", "Size Distribution": {"<message MB>": [count, total ms]}}}}}}}``
(a "Total Op Info" entry sums the ops and is skipped; SDMA sums HCCS, PCIE and SIO and is skipped).
communication_matrix.json: ``{step: {"collective" | "p2p": {"<op>-<top1|middle|bottomN|total>@<hash>":
{"<src>-<dst>": {"Transport Type", "Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)", "Op Name"}}}}}``;
the same op's row appears under several groups (deduplicated by op name and link) and the "-total" group sums
ops (skipped). MB are 1e6 bytes and GB/s 1e9 bytes/s, as msprof computes them (MB / ms).

Hostile files (NUL bytes, /dev/zero, a FIFO, huge or non-finite numbers, wrong types, deep nesting) end in a
CalibrationError naming the file and the field.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from opsim.errors import CalibrationError, shown
from opsim.ingest.transports import MAX_BANDWIDTH_GBPS, MAX_LATENCY_US, TRANSPORTS
from opsim.safe_io import read_bounded, shown_path

MAX_COMM_BYTES = 64 << 20
"""Largest communication file read: about 45,000 collectives (torch_npu writes about 1.4 KB per op); parsed,
such a file takes about 10 times its size in memory."""
MAX_NUMBER_CHARS = 40
"""Longest number accepted in the JSON text (beyond that it is damage, and int() would be slow)."""
MAX_COUNT = 10 ** 12
SKIPPED_TRANSPORTS = frozenset({"SDMA"})
"""Aggregates of other transports in msprof's output."""


@dataclass(frozen=True)
class Transport:
    """One transport's traffic in one op: totals and the Size Distribution buckets (MB, count, total ms)."""

    size_mb: float
    time_ms: float
    buckets: tuple[tuple[float, int, float], ...]


@dataclass(frozen=True)
class CommOp:
    """One collective or p2p op of communication.json."""

    file: str
    step: str
    kind: str
    name: str
    """The op name before the "@group hash" (hcom_allReduce__586_0_1)."""
    transit_us: float | None
    wait_us: float | None
    idle_us: float | None
    transports: dict[str, Transport]
    group_hash: str = ""
    """The group's hash after the "@" of the op's key (the job import groups its ranks by it)."""


@dataclass(frozen=True)
class LinkRow:
    """One src-dst row of communication_matrix.json (one op's traffic on one link)."""

    file: str
    step: str
    op_name: str
    src: int
    dst: int
    transport: str
    size_mb: float
    time_ms: float


def _fail(file: str, field: str, problem: str) -> CalibrationError:
    """The error of a bad field; the field path is built plainly and cut here, on failure only."""
    return CalibrationError(f"{file}: field {shown(field, 240, quote=False)}: {problem}")


def _big_number(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number of {len(text)} characters")
    return float(text)


def _refuse_constant(text: str) -> float:
    raise ValueError(f"{text} is not a measurement")


def load_json(path: str | Path, what: str) -> Any:
    """The JSON of a communication file: bounded read, numbers bounded, no NaN/Infinity, no deep nesting."""
    data = read_bounded(path, MAX_COMM_BYTES, what, CalibrationError)
    label = shown_path(path)
    try:
        return json.loads(data, parse_int=_big_number, parse_float=_big_number, parse_constant=_refuse_constant)
    except RecursionError:
        raise CalibrationError(f"{label}: nested too deep to be {what}; give the file torch_npu wrote") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise CalibrationError(f"{label}: not valid JSON ({shown(str(exc), 160, quote=False)}); give {what} "
                               "as torch_npu writes it") from None


def _obj(value: Any, file: str, field: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(file, field, f"expected an object, got {type(value).__name__} {shown(value, 60)}")
    return value


def _num(value: Any, file: str, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
            or value > 1e15:
        raise _fail(file, field, f"expected a non-negative number, got {shown(value, 60)}")
    return float(value)


def _opt(info: dict, key: str, file: str, field: str, scale: float) -> float | None:
    return None if info.get(key) is None else _num(info[key], file, f"{field}.{key}") * scale


def _steps(doc: Any, file: str) -> Iterator[tuple[str, str, str, dict]]:
    """(step, kind, entry name, entry) of a communication file; a file without step level is one step."""
    top = _obj(doc, file, "(top level)")
    steps = {"": top} if ("collective" in top or "p2p" in top) else top
    for step, body in steps.items():
        body = _obj(body, file, step or "(top level)")
        for kind in ("collective", "p2p"):
            entries = _obj(body.get(kind, {}), file, f"{step}.{kind}".lstrip("."))
            for name, entry in entries.items():
                yield step, kind, name, entry


def _buckets(dist: Any, file: str, field: str) -> tuple[tuple[float, int, float], ...]:
    out = []
    for size, pair in _obj(dist, file, field).items():
        where = f"{field}.{size!r}"
        try:
            mb = _big_number(size)
        except ValueError:
            raise _fail(file, where, "the key must be a message size in MB") from None
        if not isinstance(pair, list) or len(pair) != 2:
            raise _fail(file, where, f"expected [count, total ms], got {shown(pair, 60)}")
        count = _num(pair[0], file, where + "[0]")
        if count != int(count) or count > MAX_COUNT:
            raise _fail(file, where + "[0]", f"expected a message count, got {shown(pair[0], 40)}")
        out.append((_num(mb, file, where), int(count), _num(pair[1], file, where + "[1]")))
    return tuple(out)


def read_communication(path: str | Path) -> list[CommOp]:
    """The ops of a communication.json (Total Op Info skipped)."""
    file = shown_path(path)
    ops = []
    for step, kind, name, entry in _steps(load_json(path, "a communication.json"), file):
        if name == "Total Op Info":
            continue
        field = f"{step}.{kind}.{name}".lstrip(".")
        entry = _obj(entry, file, field)
        times = _obj(entry.get("Communication Time Info", {}), file, field + ".Communication Time Info")
        bw = _obj(entry.get("Communication Bandwidth Info", {}), file, field + ".Communication Bandwidth Info")
        transports = {}
        for tr, stats in bw.items():
            if tr in SKIPPED_TRANSPORTS:
                continue
            where = f"{field}.{tr}"
            stats = _obj(stats, file, where)
            transports[str(tr)] = Transport(
                size_mb=_opt(stats, "Transit Size(MB)", file, where, 1.0) or 0.0,
                time_ms=_opt(stats, "Transit Time(ms)", file, where, 1.0) or 0.0,
                buckets=_buckets(stats.get("Size Distribution", {}), file, where + ".Size Distribution"))
        tf = field + ".Communication Time Info"
        ops.append(CommOp(file=file, step=step, kind=kind, name=str(name).split("@")[0],
                          transit_us=_opt(times, "Transit Time(ms)", file, tf, 1000.0),
                          wait_us=_opt(times, "Wait Time(ms)", file, tf, 1000.0),
                          idle_us=_opt(times, "Idle Time(ms)", file, tf, 1000.0), transports=transports,
                          group_hash=str(name).partition("@")[2]))
    return ops


def read_groups(path: str | Path) -> dict[str, set[int]]:
    """Group hash (after the "@" of a communication_matrix.json key) -> every rank its links name ("0-1" ..
    "0-7"): the group's members as this rank saw them."""
    file = shown_path(path)
    out: dict[str, set[int]] = {}
    for step, kind, group, links in _steps(load_json(path, "a communication_matrix.json"), file):
        gfield = f"{step}.{kind}.{group}".lstrip(".")
        members = out.setdefault(str(group).rpartition("@")[2], set())
        for link in _obj(links, file, gfield):
            src, _, dst = str(link).partition("-")
            members.update((_rank(src, file, f"{gfield}.{link}"), _rank(dst, file, f"{gfield}.{link}")))
    return out


def _rank(text: str, file: str, field: str) -> int:
    if not text.isdigit() or len(text) > 9:
        raise _fail(file, field, "a link is named <src rank>-<dst rank>")
    return int(text)


def read_matrix(path: str | Path) -> list[LinkRow]:
    """The per-op link rows of a communication_matrix.json (each op's row once; "-total" groups skipped)."""
    file = shown_path(path)
    seen: dict[tuple, LinkRow] = {}
    for step, kind, group, links in _steps(load_json(path, "a communication_matrix.json"), file):
        if str(group).split("@")[0].endswith("-total"):
            continue
        gfield = f"{step}.{kind}.{group}".lstrip(".")
        for link, row in _obj(links, file, gfield).items():
            field = f"{gfield}.{link}"
            row = _obj(row, file, field)
            src, _, dst = str(link).partition("-")
            op = row.get("Op Name")
            transport = row.get("Transport Type")
            if not isinstance(op, str) or not isinstance(transport, str):
                raise _fail(file, field, "expected string Op Name and Transport Type")
            key = (step, op, link)
            seen.setdefault(key, LinkRow(
                file=file, step=step, op_name=op, src=_rank(src, file, field), dst=_rank(dst, file, field),
                transport=transport, size_mb=_num(row.get("Transit Size(MB)"), file, field + ".Transit Size(MB)"),
                time_ms=_num(row.get("Transit Time(ms)"), file, field + ".Transit Time(ms)")))
    return list(seen.values())


__all__ = ["CommOp", "LinkRow", "Transport", "TRANSPORTS", "MAX_BANDWIDTH_GBPS", "MAX_LATENCY_US", "MAX_COMM_BYTES",
           "load_json", "read_communication", "read_groups", "read_matrix"]
