"""Scenario runner throughput: the million-call `scenarios/large.yaml`, and trace on/off side by side.

    python benchmarks/scenario_large.py            # the full million calls (about a minute on 2 cores)
    python benchmarks/scenario_large.py --calls 100000

Prints wall time, simulated calls per wall-second and the peak resident memory of this process, then a
smaller slice run with the full trace and without it, as a ratio (the cost of keeping every record).
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from opsim.scenario.runner import run_scenario  # noqa: E402


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def run(calls: int, trace: bool) -> tuple[float, int]:
    per_thread_iters = max(1, calls // 8)  # two threads, four calls per iteration
    overrides = {"threads.0.program.0.loop.count": per_thread_iters,
                 "threads.1.program.0.loop.count": per_thread_iters, "trace": trace}
    t0 = time.perf_counter()
    res = run_scenario(ROOT / "scenarios" / "large.yaml", overrides=overrides, write=False)
    wall = time.perf_counter() - t0
    assert not res.summary["errors"] and res.summary["leaks"]["count"] == 0
    return wall, res.summary["op_calls"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--slice", type=int, default=40_000, help="calls in the trace on/off comparison")
    args = ap.parse_args()
    wall, calls = run(args.calls, trace=False)
    print(f"large.yaml, {calls} calls, trace off: {wall:.1f} s wall, {calls / wall:,.0f} calls/s, "
          f"peak RSS {peak_rss_mib():.0f} MiB")
    off, n = run(args.slice, trace=False)
    on, _ = run(args.slice, trace=True)
    print(f"{n} calls: trace off {off:.2f} s, trace on {on:.2f} s, on/off = {on / off:.2f}")


if __name__ == "__main__":
    main()
