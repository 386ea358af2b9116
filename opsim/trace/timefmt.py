"""Exact output times: simulated time becomes integer nanoseconds once, and every writer formats from those.

Simulated time is a float in microseconds. Each output (trace.json, trace_view.json, the CSVs, the
GE_PROFILING_TO_STD_OUT text, the profiler databases) converts a time to an integer nanosecond with `to_ns`
exactly once (an end is converted from `start + dur`, never as `to_ns(start) + to_ns(dur)`), and then only
formats integers. Because rounding is monotone, a child span that ends before its parent in simulated time
still does after rounding, and siblings never overlap.

Two text forms:

- `us_text(ns, decimals)`: an exact decimal (``1.400``), no float involved: the CSVs, trace_view.json and the
  nnopbase lines use it.
- `json_ts(ns)` and `dur_float(start_ns, end_ns)`: Chrome Trace JSON numbers, which readers parse as doubles
  and add. The duration is the largest double for which ``ts + dur`` (double addition) does not pass the end's
  double (it lands on it exactly unless the rounding of the sum cannot), so ``1.1 + 0.3 = 1.4000000000000001``
  can never push a slice past its sibling; `SliceNester` also caps a child's sum at its parent's.
"""
from __future__ import annotations

import math

NS_PER_US = 1000


def to_ns(t_us: float) -> int:
    """Simulated microseconds -> integer nanoseconds (round half to even, as numpy's rint)."""
    return int(round(t_us * 1000.0))


def to_ns_array(t_us):  # numpy array in, int64 array out
    """`to_ns` over a numpy array (bit-identical results)."""
    import numpy as np
    return np.rint(t_us * 1000.0).astype(np.int64)


def us_text(ns: int, decimals: int = 3) -> str:
    """Integer nanoseconds as an exact microsecond decimal with 3 (or more, zero-padded) decimals."""
    if ns < 0:
        return "-" + us_text(-ns, decimals)
    q, r = divmod(ns, NS_PER_US)
    return f"{q}.{r:03d}" + "0" * (decimals - 3)


def ts_float(ns: int) -> float:
    """A Chrome Trace ``ts`` (microseconds): the nearest double to ns / 1000."""
    return ns / 1000.0


def json_ts(ns: int) -> str:
    """`ts_float` as JSON text (what ``json.dumps`` writes for it)."""
    return repr(ns / 1000.0)


def dur_float(start_ns: int, end_ns: int, cap: float = math.inf) -> float:
    """A non-negative double ``d`` with ``start + d`` (double addition) equal to ``min(end, cap)``, or one step
    below it when the rounding of the sum cannot land on it (a tie); never past it. start and end are the
    nearest doubles to start_ns / 1000 and end_ns / 1000. The plain quotient (e - s) / 1000 is used when it
    already lands (it prints shortest: ``0.3``), else the difference of the two doubles."""
    ts = start_ns / 1000.0
    te = min(end_ns / 1000.0, cap)
    d = (end_ns - start_ns) / 1000.0
    if ts + d == te:
        return d
    d = te - ts
    if d <= 0.0:
        return 0.0
    # |ts + d - te| is at most half a unit of d; the sum passes te only when d and te share a binade, so a
    # step or two of d brings it back
    while d > 0.0 and ts + d > te:
        d = math.nextafter(d, 0.0)
    return d


class SliceNester:
    """Places the slices of one trace track so that they nest strictly, in integer nanoseconds and in the
    doubles a reader adds: feed them in (start, -end, record order) order; `place` clamps a child's end to its
    parent's and returns the end and the duration to write (a child's ``ts + dur`` never passes its parent's)."""

    __slots__ = ("ends", "float_ends")

    def __init__(self) -> None:
        self.ends: list[int] = []
        self.float_ends: list[float] = []

    def place(self, start_ns: int, end_ns: int) -> tuple[int, float]:
        ends, float_ends = self.ends, self.float_ends
        while ends and start_ns >= ends[-1]:
            ends.pop()
            float_ends.pop()
        cap = math.inf
        if ends:
            if end_ns > ends[-1]:
                end_ns = ends[-1]
            cap = float_ends[-1]
        d = dur_float(start_ns, end_ns, cap)
        ends.append(end_ns)
        float_ends.append(start_ns / 1000.0 + d)
        return end_ns, d


__all__ = ["to_ns", "to_ns_array", "us_text", "json_ts", "dur_float", "ts_float", "SliceNester",
           "NS_PER_US"]
