"""Output writing at scale: large.yaml cut to N calls with the full trace and every output written.

    python benchmarks/profiler_output.py                  # 10k and 40k calls side by side (about a minute)
    python benchmarks/profiler_output.py --million        # also 10^6 calls with --profiler-output both

Each size runs `opsim run` in its own process (so peak memory is that run's), with trace.json, the msprof CSVs,
the records file and the profiler output in both layouts. Prints, per size: total wall time, the simulate and
write wall times from summary.json, CPU time (user + system) and peak resident memory; then each issue-30 target as met / not met:

- 40k calls in < 30 s;  wall(40k) / wall(10k) <= 5;  10^6 calls with ``--profiler-output both`` in < 120 s and
  < 2 GiB.

Wall times depend on the machine and its load: run the sizes side by side and read the ratio first.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALLS_PER_ITERATION = 8
"""large.yaml: two threads, four calls per loop iteration each."""


def run(calls: int, out: Path) -> dict:
    """One `opsim run` of large.yaml cut to `calls` calls with every output; wall, simulate, write, peak RSS."""
    n = max(1, calls // CALLS_PER_ITERATION)
    cmd = [sys.executable, "-m", "opsim", "run", str(ROOT / "scenarios" / "large.yaml"), "--out", str(out),
           "--profiler-output", "both", "--no-progress", "--quiet",
           "--set", f"threads.0.program.0.loop.count={n}", "--set", f"threads.1.program.0.loop.count={n}",
           "--set", "trace=true", "--set", "outputs.trace=true", "--set", "outputs.csv=true"]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, cpu0 = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    peak = usage.ru_maxrss  # the largest child so far (KiB)
    cpu = usage.ru_utime + usage.ru_stime - cpu0  # user + system: steadier than wall on a shared machine
    summary = json.loads((out / "summary.json").read_text())
    return {"calls": summary["op_calls"], "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "simulate_s": summary["wall"]["wall_seconds"],
            "write_s": summary["wall"].get("write_seconds"),
            "peak_rss_mib": round(peak / 1024) if peak > before else None}


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--million", action="store_true", help="also run 10^6 calls (several minutes)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="opsim-bench-") as tmp:
        rows = [run(c, Path(tmp) / f"c{c}") for c in (10_000, 40_000)]
        if args.million:
            rows.append(run(1_000_000, Path(tmp) / "c1000000"))
    for r in rows:
        print(f"{r['calls']:>8} calls: {r['wall_s']:7.2f} s wall, {r['cpu_s']:7.2f} s CPU (simulate "
              f"{r['simulate_s']:.2f} s, write "
              f"{r['write_s']:.2f} s), peak RSS {r['peak_rss_mib']} MiB")
    small, big = rows[0], rows[1]
    ratio = big["wall_s"] / small["wall_s"]
    print(f"40k calls in < 30 s: {verdict(big['wall_s'] < 30)} ({big['wall_s']:.1f} s)")
    print(f"wall(40k) / wall(10k) <= 5: {verdict(ratio <= 5)} ({ratio:.2f})")
    if args.million:
        m = rows[2]
        print(f"10^6 calls in < 120 s: {verdict(m['wall_s'] < 120)} ({m['wall_s']:.1f} s); "
              f"< 2 GiB: {verdict((m['peak_rss_mib'] or 0) < 2048)} ({m['peak_rss_mib']} MiB)")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
