"""Replay faithfulness: an imported scenario's profiler output against the real profile it came from.

Both traces (trace_view.json, or the db export of the real one) are read as TraceViews and measured the same way, inside the
first ProfilerStep of each (the replay's warm-up calls run before the profiler starts, as the real run's earlier steps did):

* ACLNN calls per (API, phase, thread): `AscendCL@aclnnXxxGetWorkspaceSize` and `AscendCL@aclnnXxx` counts,
  threads matched by name (a real thread id N is the replay's `thread_N`);
* device busy time (the union of kernel intervals) and the first-kernel-to-last-kernel span;
* per-API medians of the phase-1 and phase-2 host durations.
"""
from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from opsim.importer.scenario import thread_name
from opsim.ingest import TraceView
from opsim.ingest.sources import read_view

DEVICE_TOLERANCE = 0.10
"""Device busy time and span must be within 10% of the original."""
HOST_TOLERANCE = 0.20
"""Per-API host medians must be within 20% of the original."""


def _window(view: TraceView) -> tuple[int, int]:
    steps = sorted((e.ts, e.end) for e in view.events if e.name.startswith("ProfilerStep#") and e.dur > 0)
    if steps:
        return steps[0]
    return min(e.ts for e in view.events), max(e.end for e in view.events)


def measure(view: TraceView) -> dict[str, Any]:
    """The figures of one trace, inside its first ProfilerStep."""
    # lazy: keeps opsim.trace out of importing opsim.importer.compare
    from opsim.trace.ascend_profiler import merge_intervals
    lo, hi = _window(view)
    names = {tid: n for (pid, tid), n in view.thread_names.items()}
    counts: Counter = Counter()
    durs: dict[tuple[str, str], list[int]] = {}
    for a in view.acl_api_events():
        e = a.event
        if a.kind not in ("phase1", "phase2") or not lo <= e.ts <= hi:
            continue
        label = names.get(e.tid, "")
        thread = label if label.startswith("thread_") else thread_name(e.tid)
        counts[(a.api, a.kind, thread)] += 1
        durs.setdefault((a.api, a.kind), []).append(e.dur)
    kernels = [(k.ts, k.end) for k in view.device_kernels() if lo <= k.ts <= hi and k.dur > 0]
    busy = sum(e - s for s, e in merge_intervals(kernels))
    span = (max(e for _, e in kernels) - min(s for s, _ in kernels)) if kernels else 0
    return {"counts": counts, "medians_ns": {k: statistics.median(v) for k, v in durs.items()},
            "busy_ns": busy, "span_ns": span, "kernels": len(kernels), "step_ns": hi - lo}


def _rel(sim: float, real: float) -> float:
    return abs(sim - real) / real if real else (0.0 if sim == real else float("inf"))


def compare(real: str | Path | TraceView, replay: str | Path | TraceView) -> dict[str, Any]:
    """Figures of both traces and their differences; `ok` says whether every done-when bound holds."""
    r = measure(real if isinstance(real, TraceView) else read_view(real))
    s = measure(replay if isinstance(replay, TraceView) else read_view(replay))
    count_diff = {f"{api} {kind} {th}": (r["counts"].get((api, kind, th), 0), s["counts"].get((api, kind, th), 0))
                  for api, kind, th in sorted(set(r["counts"]) | set(s["counts"]))
                  if r["counts"].get((api, kind, th), 0) != s["counts"].get((api, kind, th), 0)}
    medians = {}
    for key, real_ns in sorted(r["medians_ns"].items()):
        sim_ns = s["medians_ns"].get(key)
        medians[f"{key[0]} {key[1]}"] = {
            "real_us": real_ns / 1000, "replay_us": None if sim_ns is None else sim_ns / 1000,
            "rel": None if sim_ns is None else _rel(sim_ns, real_ns)}
    busy_rel = _rel(s["busy_ns"], r["busy_ns"])
    span_rel = _rel(s["span_ns"], r["span_ns"])
    worst = max((m["rel"] if m["rel"] is not None else float("inf") for m in medians.values()), default=0.0)
    return {
        "calls_real": sum(r["counts"].values()), "calls_replay": sum(s["counts"].values()),
        "count_mismatches": count_diff,
        "busy_us": (r["busy_ns"] / 1000, s["busy_ns"] / 1000), "busy_rel": busy_rel,
        "span_us": (r["span_ns"] / 1000, s["span_ns"] / 1000), "span_rel": span_rel,
        "kernels": (r["kernels"], s["kernels"]),
        "medians": medians, "worst_median_rel": worst,
        "ok": not count_diff and busy_rel <= DEVICE_TOLERANCE and span_rel <= DEVICE_TOLERANCE
        and worst <= HOST_TOLERANCE,
    }


def format_comparison(c: dict[str, Any]) -> list[str]:
    """The comparison as printable lines."""
    lines = [f"ACLNN calls (phase 1 + phase 2, in step 1): real {c['calls_real']}, replay {c['calls_replay']}, "
             f"{len(c['count_mismatches'])} (API, phase, thread) count(s) differ",
             f"device busy: real {c['busy_us'][0]:.3f} us, replay {c['busy_us'][1]:.3f} us ({c['busy_rel']:.1%})",
             f"kernel span: real {c['span_us'][0]:.3f} us, replay {c['span_us'][1]:.3f} us ({c['span_rel']:.1%})",
             f"per-API host medians: worst difference {c['worst_median_rel']:.1%}"]
    for k, (a, b) in c["count_mismatches"].items():
        lines.append(f"  count {k}: real {a}, replay {b}")
    return lines


__all__ = ["compare", "measure", "format_comparison", "DEVICE_TOLERANCE", "HOST_TOLERANCE"]
