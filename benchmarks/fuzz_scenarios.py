"""Fuzzing the scenario loader in this process: mutated bundled scenarios must be accepted or refused with a
`ScenarioError`, never a traceback; accepted small ones are also run, and must not raise.

    python benchmarks/fuzz_scenarios.py              # 5000 mutated scenarios
    python benchmarks/fuzz_scenarios.py --count 200  # a quick look

Mutations come from tests/scenario/mutations.py (the same as the property test), seeded 0..count-1, so a run
is reproducible and a failure names its seed. Exits 1 on any traceback.
"""
from __future__ import annotations

import argparse
import logging
import random
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "scenario"))

RUN_AT_MOST_CALLS = 2000
"""Accepted scenarios estimated at or under this many calls are also run (write=False)."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=5000)
    ap.add_argument("--no-run", action="store_true", help="only load, never run the accepted scenarios")
    args = ap.parse_args(argv)
    logging.disable(logging.CRITICAL)
    from mutations import mutate

    from opsim.errors import OpsimError
    from opsim.scenario.loader import load_scenario
    from opsim.scenario.runner import run_scenario
    counts = {"mutated": 0, "accepted": 0, "refused": 0, "tracebacks": 0, "runs": 0, "run_tracebacks": 0}
    t0 = time.perf_counter()
    for seed in range(args.count):
        data = mutate(random.Random(seed))
        counts["mutated"] += 1
        try:
            config = load_scenario(data)
        except OpsimError:
            counts["refused"] += 1
            continue
        except Exception:
            counts["tracebacks"] += 1
            print(f"seed {seed}: traceback while loading", file=sys.stderr)
            traceback.print_exc()
            continue
        counts["accepted"] += 1
        if args.no_run or config.estimated_calls() > RUN_AT_MOST_CALLS:
            continue
        counts["runs"] += 1
        try:
            run_scenario(config, write=False)
        except Exception:
            counts["run_tracebacks"] += 1
            print(f"seed {seed}: traceback while running", file=sys.stderr)
            traceback.print_exc()
    wall = time.perf_counter() - t0
    print(" ".join(f"{k}={v}" for k, v in counts.items()) + f" wall={wall:.1f}s")
    return 1 if counts["tracebacks"] or counts["run_tracebacks"] else 0


if __name__ == "__main__":
    sys.exit(main())
