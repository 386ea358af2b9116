"""The per-rank table of a multi-rank run: each rank's time breakdown and its collectives' waits.

Computing, Communication (and the part of it not overlapped), Free and Stage are step_trace_time.csv's
figures (opsim.trace.step_breakdown) over the whole run; Wait, Transit and Idle sum the rank's collectives as
its communication.json does. With `trace: false` no task is kept, so the breakdown is left out and the table
keeps the makespan and the collectives' sums.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, NamedTuple

from opsim.trace.step_breakdown import breakdown
from opsim.trace.timefmt import to_ns


class _Task(NamedTuple):
    task_type: str
    start_ns: int
    end_ns: int


def rank_row(rank: int, *, slowdown: float, calls: int, device_end_us: float, collectives: Iterable[Any],
             device_records: Mapping[str, list] | None) -> dict[str, Any]:
    """One rank's row (times in microseconds, rounded to the nanosecond)."""
    colls = list(collectives)
    row: dict[str, Any] = {"rank": rank, "slowdown": slowdown, "op_calls": calls,
                           "device_end_us": _us(to_ns(device_end_us)), "collectives": len(colls),
                           "wait_us": _us(sum(to_ns(c.wait_us) for c in colls)),
                           "transit_us": _us(sum(to_ns(c.transit_us) for c in colls)),
                           "idle_us": _us(sum(to_ns(c.idle_us) for c in colls))}
    if device_records is not None:
        tasks = [_Task(t, to_ns(s), to_ns(e)) for t, s, e in zip(device_records["task_type"],
                                                                 device_records["start"], device_records["end"])]
        b = breakdown(0, 0, to_ns(device_end_us), tasks)
        row.update(computing_us=_us(b.computing), communication_us=_us(b.communication),
                   communication_not_overlapped_us=_us(b.comm_not_overlapped), free_us=_us(b.free),
                   stage_us=_us(b.stage))
    return row


MAX_LINES = 16
"""Ranks listed one per line in the run table; a larger job gets its range and its slowest ranks."""


def rank_lines(rows: list[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The run table's lines for the ranks: one each up to MAX_LINES ranks, else the spread over all ranks
    and the lines of the ranks that waited least (the slowest: the others wait for them) and most."""
    if len(rows) > MAX_LINES:
        by_wait = sorted(rows, key=lambda r: (r["wait_us"], r["rank"]))
        waits = f"wait {_ms(by_wait[0]['wait_us'])} - {_ms(by_wait[-1]['wait_us'])}"
        return [(f"ranks ({len(rows)})", f"{waits}; listed: the 3 that waited least and the one that waited most"),
                *_lines(by_wait[:3] + by_wait[-1:])]
    return _lines(rows)


def _lines(rows: list[Mapping[str, Any]]) -> list[tuple[str, str]]:
    out = []
    for r in rows:
        parts = []
        if "computing_us" in r:
            parts.append(f"computing {_ms(r['computing_us'])}, communication {_ms(r['communication_us'])} "
                         f"({_ms(r['communication_not_overlapped_us'])} not overlapped), stage {_ms(r['stage_us'])}")
        parts.append(f"{r['collectives']} collectives: wait {_ms(r['wait_us'])}, transit {_ms(r['transit_us'])}")
        if r.get("slowdown", 1.0) != 1.0:
            parts.append(f"slowdown x{r['slowdown']:g}")
        out.append((f"rank {r['rank']}", "; ".join(parts)))
    return out


def _us(ns: int) -> float:
    return ns / 1000.0


def _ms(us: float) -> str:
    return f"{us / 1000.0:.3f} ms"


__all__ = ["rank_row", "rank_lines"]
