"""The profiling window: what the profiler outputs keep when a run warmed up with the profiler stopped.

A scenario's `warmup` steps (opsim.scenario.warmup) end with a `profiler_start` instant; torch_npu collects
nothing before its profiler starts, so the profiler model (opsim.trace.ascend_build) drops every host span,
device task, instant and memory event of the recorder that began before it. Runs without warm-up have no such
instant and are read whole.
"""
from __future__ import annotations

from typing import Any

PROFILER_START = "profiler_start"
"""The instant that opens the profiling window (track `PROFILER_TRACK`; args: how many threads warmed up)."""
PROFILER_TRACK = "profiler"


def window_start(instants: dict[str, list]) -> float | None:
    """The simulated time the profiler started (the first `profiler_start` instant); None: it ran throughout."""
    for t, name in zip(instants["time"], instants["name"]):
        if name == PROFILER_START:
            return float(t)
    return None


def since(columns: dict[str, Any], time_column: str, t0: float | None) -> dict[str, Any]:
    """The rows of `columns` (lists or numpy arrays of one length) whose `time_column` is at or after `t0`;
    the same dict when `t0` is None or every row is."""
    if t0 is None:
        return columns
    import numpy as np  # lazy: keeps numpy out of importing opsim.scenario.warmup
    times = np.asarray(columns[time_column], dtype=np.float64)
    keep = np.flatnonzero(times >= t0)
    if len(keep) == len(times):
        return columns
    rows = keep.tolist()
    return {c: v[keep] if isinstance(v, np.ndarray) else [v[i] for i in rows] for c, v in columns.items()}


__all__ = ["PROFILER_START", "PROFILER_TRACK", "window_start", "since"]
