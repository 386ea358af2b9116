"""The per-rank table of a multi-rank run: each rank's time breakdown and its collectives' waits.

Computing, Communication (and the part of it not overlapped), Free and Stage are step_trace_time.csv's
figures (opsim.trace.step_breakdown) over the whole run; Wait, Transit and Idle sum the rank's collectives as
its communication.json does. With `trace: false` no task is kept, so the breakdown is left out and the table
keeps the makespan and the collectives' sums.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from opsim.trace.step_breakdown import breakdown
from opsim.trace.timefmt import to_ns


class _Task(NamedTuple):
    task_type: str
    start_ns: int
    end_ns: int


def rank_row(rank: int, *, slowdown: float, calls: int, device_end_us: float, totals: Any,
             device_records: Mapping[str, list] | None) -> dict[str, Any]:
    """One rank's row (times in microseconds, rounded to the nanosecond); `totals`: its collectives summed
    (opsim.cluster.cluster.CollectiveTotals)."""
    row: dict[str, Any] = {"rank": rank, "slowdown": slowdown, "op_calls": calls,
                           "device_end_us": _us(to_ns(device_end_us)), "collectives": totals.count,
                           "wait_us": _us(totals.wait_ns), "transit_us": _us(totals.transit_ns),
                           "idle_us": _us(totals.idle_ns)}
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


def ranks_section(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """summary.json's `ranks`: the rows keyed by rank ("0", "1", ...), so a sweep can name
    `summary.ranks.3.wait_us`."""
    return {str(r["rank"]): r for r in rows}


def cluster_section(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """summary.json's `cluster`: the job's headline figures (what a sweep over ranks or links compares)."""
    slowest = min(rows, key=lambda r: (r["wait_us"], r["rank"]))
    waiting = max(rows, key=lambda r: (r["wait_us"], -r["rank"]))
    out = {"size": len(rows), "collectives": sum(r["collectives"] for r in rows),
           "max_wait_us": waiting["wait_us"], "waiting_rank": waiting["rank"], "slowest_rank": slowest["rank"],
           "max_transit_us": max(r["transit_us"] for r in rows)}
    if "communication_not_overlapped_us" in rows[0]:
        out["max_communication_not_overlapped_us"] = max(r["communication_not_overlapped_us"] for r in rows)
    return out


CLUSTER_FIELDS = ("size", "collectives", "max_wait_us", "waiting_rank", "slowest_rank", "max_transit_us",
                  "max_communication_not_overlapped_us")
"""The fields of summary.json's `cluster` section (a job's run only)."""


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


__all__ = ["rank_row", "rank_lines", "ranks_section", "cluster_section", "CLUSTER_FIELDS"]
