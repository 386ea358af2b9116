"""Which source answered the simulated device time, at which level, and the makespan band it implies.

``CostModel`` records, per (op type, core), the levels and sources of the distinct kernels it predicted and
their summed predicted, low and high durations. Each unit pool's simulated busy time (unit-microseconds, a
total every execution path folds identically) is split between the (level, source) pairs of the cores that
run on it in proportion to their predicted time; a pool whose kernels did not come from the predictor
(explicit durations, memcpy) counts as ``explicit``. The shares are thus weighted by distinct kernels, not by
how often each ran: a first-order attribution. The band scales each op's device time by its low/high ratio; the makespan band moves the
makespan by the busiest stream's busy time times that relative change (a first-order estimate that assumes
the busiest stream's work lies on the critical path).
"""
from __future__ import annotations

from typing import Any, Mapping


_POOL = {"AI_CORE": "aicore", "MIX_AIC": "aicore", "AI_VECTOR_CORE": "vector", "MIX_AIV": "vector",
         "AI_CPU": "aicpu"}


def timing_sources(cost: Any, pool_us: Mapping[str, float], makespan: float,
                   busiest_stream_us: float) -> dict[str, Any]:
    """summary.json's ``device_timing``: sources and levels with their unit time and share, the calibration
    name and the makespan band."""
    by_pool: dict[str, dict[tuple[str, str], list[float]]] = {}
    for (_op, core), answers in sorted(cost.answers.items()):
        pool = _POOL.get(core, "aicore")
        if pool not in pool_us:
            pool = "aicore"
        into = by_pool.setdefault(pool, {})
        for key, vals in answers.items():
            acc = into.setdefault(key, [0.0, 0.0, 0.0])
            for i in range(3):
                acc[i] += vals[i]
    sources: dict[str, float] = {}
    levels: dict[str, float] = {}
    total = low = high = 0.0
    for pool, us in sorted(pool_us.items()):
        if us <= 0:
            continue
        answers = by_pool.get(pool)
        total += us
        if not answers:
            sources["explicit"] = sources.get("explicit", 0.0) + us
            levels["explicit"] = levels.get("explicit", 0.0) + us
            low += us
            high += us
            continue
        pred = sum(v[1] for v in answers.values()) or 1.0
        for (level, source), (lo, mid, hi) in sorted(answers.items()):  # type: ignore[misc]
            part = us * mid / pred
            sources[source] = sources.get(source, 0.0) + part
            levels[level] = levels.get(level, 0.0) + part
            if mid > 0:
                low += part * lo / mid
                high += part * hi / mid
    name = cost.fitted.name if cost.fitted is not None else None

    def table(d: dict[str, float]) -> dict[str, dict[str, float]]:
        return {k: {"unit_us": round(v, 3), "share": round(v / total, 4) if total > 0 else 0.0}
                for k, v in sorted(d.items(), key=lambda kv: -kv[1])}

    rel_lo = low / total - 1.0 if total > 0 else 0.0
    rel_hi = high / total - 1.0 if total > 0 else 0.0
    return {"calibration": name, "sources": table(sources), "levels": table(levels),
            "makespan_band_us": [round(max(makespan + busiest_stream_us * rel_lo, 0.0), 3),
                                 round(makespan + busiest_stream_us * rel_hi, 3)]}


def describe_sources(timing: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Run-table rows: the device-time sources (naming the calibration) and levels, and the makespan band."""
    if not timing:
        return []

    def shares(d: Mapping[str, Any]) -> str:
        return ", ".join(f"{k} {100 * v['share']:.1f}%" for k, v in d.items()) or "no kernels"
    src = shares(timing.get("sources") or {})
    if timing.get("calibration"):
        src += f" (calibration: {timing['calibration']})"
    lo, hi = timing.get("makespan_band_us") or (0.0, 0.0)
    return [("device time from", src), ("prediction levels", shares(timing.get("levels") or {})),
            ("makespan band", f"{lo / 1000:.3f} - {hi / 1000:.3f} ms (p10-p90 of kernel predictions)")]


__all__ = ["describe_sources", "timing_sources"]
