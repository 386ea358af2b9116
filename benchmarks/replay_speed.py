"""Replay speed of an imported real profile: calls per wall-second and per CPU-second, and run wall time against
the simulated makespan (issue 28, point 6: >= 10,000 calls/s for a 100-step replay; wall <= makespan).

1. The shared AlexNet profile (../shared/real-profiles/alexnet-910b/text/level1/rank0_ascend_pt: one step of a
   2-rank DDP job on a 910B) is imported as a folder and run twice; the second run's summary `wall` is set
   against its simulated makespan.
2. N time-shifted copies of its trace_view.json (benchmarks/import_scale.py's `write_copies`: an N-step profile of
   the same run, 2.2 MB a step) are imported and the scenario is run on the fast path (and, with --both, the
   reference path, which must give the same summary).

CPU seconds (user + system of this process) are given beside wall seconds: on a loaded machine they are the
steadier measure. An imported scenario larger than the scenario file limit (opsim.yamlio.limits.MAX_FILE_BYTES,
4 MiB: about 60 AlexNet steps) cannot be read by `opsim run`; this benchmark then loads it as data.

    python benchmarks/replay_speed.py                  # 100 steps
    python benchmarks/replay_speed.py --steps 10 --both --keep /tmp/replay
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from import_scale import write_copies  # noqa: E402

SHARED = ROOT.parent / "shared" / "real-profiles" / "alexnet-910b" / "text" / "level1" / "rank0_ascend_pt"


BUDGET = 64 << 20
"""The scenario file budget (`--max-file-mib 64`) the long replays are imported and read with."""

def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _timed(fn):
    t, c = time.perf_counter(), _cpu()
    out = fn()
    return out, time.perf_counter() - t, _cpu() - c


def _config(path: Path):
    """The scenario at `path`, read with the file budget the replays need (`--max-file-mib`), and whether it is
    beyond the default budget."""
    from opsim.scenario.limits import Limits
    from opsim.scenario.loader import load_scenario
    from opsim.yamlio.limits import MAX_FILE_BYTES
    return load_scenario(path, limits=Limits(file_bytes=BUDGET)), path.stat().st_size > MAX_FILE_BYTES


def one_step(tmp: Path) -> dict:
    from opsim.importer import import_profile, write_import
    from opsim.scenario.runner import run_scenario
    imported = write_import(import_profile(SHARED), tmp / "step" / "imported.yaml")
    cfg, _ = _config(imported.scenario_path)
    run_scenario(cfg, write=False)  # the first run pays module imports and compilation
    res, wall, cpu = _timed(lambda: run_scenario(cfg, write=False))
    return {"calls": res.summary["op_calls"], "makespan_s": res.summary["simulated_makespan_us"] / 1e6,
            "summary_wall_s": res.summary["wall"]["wall_seconds"], "wall_s": wall, "cpu_s": cpu}


def many_steps(tmp: Path, steps: int, both: bool) -> list[dict]:
    from opsim.importer import import_profile, write_import
    from opsim.scenario.runner import run_scenario
    scenario = tmp / f"x{steps}" / "imported.yaml"
    if not scenario.exists():
        trace = write_copies(steps, tmp / f"x{steps}" / "trace_view.json", source=SHARED / "ASCEND_PROFILER_OUTPUT"
                             / "trace_view.json")
        write_import(import_profile(trace), scenario, max_bytes=BUDGET)  # as `--max-file-mib` does
    cfg, beyond = _config(scenario)
    rows = []
    for fast in (True, False) if both else (True,):
        res, wall, cpu = _timed(lambda: run_scenario(cfg, write=False, fast_path=fast))
        rows.append({"fast_path": fast, "calls": res.summary["op_calls"], "wall_s": wall, "cpu_s": cpu,
                     "summary_wall_s": res.summary["wall"]["wall_seconds"], "beyond_default_budget": beyond,
                     "summary": {k: v for k, v in res.summary.items() if k != "wall"}})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--both", action="store_true", help="run the reference path too and compare the summaries")
    ap.add_argument("--keep", type=Path, help="keep (and reuse) the traces and scenarios here")
    args = ap.parse_args(argv)
    if not SHARED.is_dir():
        print(f"the shared AlexNet profile is not at {SHARED}")
        return 1
    with tempfile.TemporaryDirectory() as t:
        tmp = args.keep or Path(t)
        s = one_step(tmp)
        print(f"one AlexNet step: {s['calls']} calls, simulated makespan {s['makespan_s']:.3f} s, run wall "
              f"{s['summary_wall_s']:.3f} s (summary) / {s['wall_s']:.3f} s, CPU {s['cpu_s']:.3f} s: wall <= makespan "
              f"{'met' if s['summary_wall_s'] <= s['makespan_s'] else 'NOT met'}, CPU <= makespan "
              f"{'met' if s['cpu_s'] <= s['makespan_s'] else 'NOT met'}")
        rows = many_steps(tmp, args.steps, args.both)
        for r in rows:
            print(f"{args.steps} steps, fast_path={r['fast_path']}: {r['calls']} calls, wall {r['wall_s']:.2f} s "
                  f"(summary {r['summary_wall_s']:.2f} s), CPU {r['cpu_s']:.2f} s: {r['calls'] / r['wall_s']:.0f} "
                  f"calls per wall-second, {r['calls'] / r['cpu_s']:.0f} per CPU-second (target 10,000: "
                  f"{'met' if r['calls'] / r['summary_wall_s'] >= 10_000 else 'NOT met'})"
                  + (" [scenario beyond the default 4 MiB file budget: read with --max-file-mib 64]"
                     if r["beyond_default_budget"] else ""))
        if len(rows) == 2:
            same = json.dumps(rows[0]["summary"], sort_keys=True) == json.dumps(rows[1]["summary"], sort_keys=True)
            print("fast and reference summaries " + ("identical" if same else "DIFFER"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
