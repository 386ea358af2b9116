"""Multi-rank jobs: how fast a job simulates, how the cost grows, and the weak-scaling what-if.

    python benchmarks/cluster.py            # 8 ranks x 100,000 calls (target < 60 s), growth, weak scaling
    python benchmarks/cluster.py --quick    # 8 ranks x 2,000 calls and the growth at small sizes

1. Speed: a data-parallel step (18 MatMul/Add calls, a 16 MiB allreduce on the comm stream after an event,
   2 more calls) repeated until each of 8 ranks made 100,000 ACLNN calls, trace off (`trace: false`): wall
   time and peak RSS of the process. Target (issue "Ranks together"): < 60 s.
2. Growth: the same job at 1x, 10x and 100x the calls per rank, and at 2, 8 and 32 ranks: wall time per call
   must stay flat (linear cost) and the peak RSS bounded (trace off keeps no records).
3. Weak scaling of scenarios/data_parallel.yaml from 1 to 2, 8 and 16 ranks (same per-rank work, a larger
   group): the step time, communication and its part not hidden behind computing, per rank count, with the
   transfer model's links (the hccs-910b preset within a server of 8, roce-200g across servers; a calibration
   from the shared profile replaces them with `--calibration FILE`).
4. Weak scaling of the shared job (../shared/real-profiles/alexnet-910b, level 1: ranks 0 and 1 of an
   8-NPU DDP AlexNet step), imported with `opsim import` and run at 1, 2, 8 and 16 ranks with the transfer
   model (`cluster.transit: model`) and the links the import's calibration fitted on the same profile
   (in-sample): the profiled step's breakdown of rank 0 (step_trace_time.csv's figures) and the waits.
   Skipped when the shared profile is not there.
Figures are measured on whatever machine runs this (a shared 2-core machine gives noisy wall times).
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

CALLS_PER_STEP = 20


def dp_job(ranks: int, steps: int) -> dict:
    """The speed benchmark's job: `steps` data-parallel steps of 20 calls and one allreduce per rank."""
    body: list = []
    for _ in range(9):
        body.append({"op": "Matmul", "stream": "compute", "shapes": [[512, 512], [512, 512]], "dtype": "float16"})
        body.append({"op": "Add", "stream": "compute", "shape": [512, 512], "dtype": "float16"})
    body += [{"record_event": {"event": "grads", "stream": "compute"}},
             {"wait_event": {"event": "grads", "stream": "comm"}},
             {"collective": "allreduce", "group": "world", "bytes": 16 << 20, "dtype": "float16", "stream": "comm"},
             {"op": "Mul", "stream": "compute", "shape": [512, 512], "dtype": "float16"},
             {"op": "Relu", "stream": "compute", "shape": [512, 512], "dtype": "float16"}]
    return {"name": "dp_bench", "cluster": {"size": ranks}, "groups": [{"name": "world", "ranks": "all"}],
            "events": ["grads"], "trace": False, "outputs": {"trace": False, "csv": False, "records": False},
            "threads": [{"name": "train", "streams": ["compute", "comm"],
                         "program": [{"loop": {"count": steps, "body": body}}, {"sync_device": True}]}]}


def timed(data: dict, **kw) -> tuple[float, dict]:
    t = time.perf_counter()
    res = run_scenario(data, write=False, **kw)
    return time.perf_counter() - t, res.summary


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def speed(calls_per_rank: int) -> None:
    steps = calls_per_rank // CALLS_PER_STEP
    wall, summary = timed(dp_job(8, steps))
    calls = sum(r["op_calls"] for r in summary["ranks"].values())
    verdict = "met" if wall < 60 or calls_per_rank < 100_000 else "NOT MET"
    print(f"8 ranks x {calls_per_rank:,} calls, trace off: {wall:.2f} s ({calls / wall:,.0f} calls/s), "
          f"peak RSS {rss_mib():.0f} MiB; target < 60 s at 100,000: {verdict}")


def growth(base_steps: int) -> None:
    print("\ngrowth (8 ranks; wall time per call should stay flat):")
    for mult in (1, 10, 100):
        wall, summary = timed(dp_job(8, base_steps * mult))
        calls = sum(r["op_calls"] for r in summary["ranks"].values())
        print(f"  {mult:>3}x  {calls:>9,} calls  {wall:7.2f} s  {1e6 * wall / calls:6.2f} us/call  "
              f"peak RSS {rss_mib():.0f} MiB")
    print("growth in ranks (100 steps each):")
    for ranks in (2, 8, 32):
        wall, summary = timed(dp_job(ranks, 100))
        calls = sum(r["op_calls"] for r in summary["ranks"].values())
        print(f"  {ranks:>3} ranks  {calls:>9,} calls  {wall:7.2f} s  {1e6 * wall / calls:6.2f} us/call")


def weak_scaling(calibration: str | None) -> None:
    print("\nweak scaling of scenarios/data_parallel.yaml (per rank 4 steps; times in ms):")
    print(f"  {'ranks':>5}  {'makespan':>9}  {'computing':>9}  {'communication':>13}  {'not overlapped':>14}  "
          f"{'wait (max)':>10}")
    for ranks in (1, 2, 8, 16):
        _, s = timed(str(ROOT / "scenarios" / "data_parallel.yaml"), overrides={"cluster.size": ranks},
                     calibration=calibration)
        rows = list(s["ranks"].values())
        r0 = rows[0]
        print(f"  {ranks:>5}  {s['simulated_makespan_us'] / 1e3:9.3f}  {r0['computing_us'] / 1e3:9.3f}  "
              f"{r0['communication_us'] / 1e3:13.3f}  {r0['communication_not_overlapped_us'] / 1e3:14.3f}  "
              f"{max(r['wait_us'] for r in rows) / 1e3:10.3f}")


SHARED_JOB = ROOT.parent / "shared" / "real-profiles" / "alexnet-910b" / "text" / "level1"


def shared_job_scaling(folder: Path = SHARED_JOB) -> None:
    import copy
    import subprocess
    import tempfile

    import yaml

    from opsim.scenario.schema import DEFAULT_EPOCH_US
    from opsim.trace.ascend_build import build_profile
    if not folder.is_dir():
        print(f"\nweak scaling of the shared job: skipped ({folder} not found)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        job = Path(tmp) / "job.yaml"
        subprocess.run([sys.executable, "-m", "opsim", "import", str(folder), "-o", str(job)], check=True,
                       capture_output=True)
        data = yaml.safe_load(job.read_text())
        cal = str(job.parent / "job.calibration.yaml")
        print("\nweak scaling of the shared job (rank 0's profiled step; ms; links fitted in-sample):")
        print(f"  {'ranks':>5}  {'step':>8}  {'computing':>9}  {'communication':>13}  {'not overlapped':>14}  "
              f"{'wait (max)':>10}  {'transit':>8}")
        for size in (1, 2, 8, 16):
            d = copy.deepcopy(data)
            d["cluster"] = dict(d["cluster"], size=size, transit="model")
            d["ranks"] = d["ranks"][:size]
            d.setdefault("outputs", {})["records"] = False
            d["calibration"] = cal  # the import's, by its full path (the scenario names it beside itself)
            res = run_scenario(d, write=False)
            steps = [build_profile(r.sim).step_rows[0] for r in res.ranks]
            s0 = steps[0]
            t0 = s0.start_ns / 1000 - d.get("epoch_us", DEFAULT_EPOCH_US)
            waits = [sum(c.wait_us for c in r.rank.collectives if c.end_us >= t0) for r in res.ranks]
            transit = sum(c.transit_us for c in res.ranks[0].rank.collectives if c.end_us >= t0)
            print(f"  {size:>5}  {max(s.stage for s in steps) / 1e6:8.3f}  {s0.computing / 1e6:9.3f}  "
                  f"{s0.communication / 1e6:13.3f}  {s0.comm_not_overlapped / 1e6:14.3f}  "
                  f"{max(waits) / 1e3:10.3f}  {transit / 1e3:8.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small counts (under a minute)")
    ap.add_argument("--calibration", help="a calibration YAML with fitted links for the weak-scaling part")
    args = ap.parse_args(argv)
    speed(2_000 if args.quick else 100_000)
    growth(10 if args.quick else 50)
    weak_scaling(args.calibration)
    shared_job_scaling()
    return 0


if __name__ == "__main__":
    sys.exit(main())
