"""The hostile-input campaign: 10,000 and more seeded cases over every surface, in this process.

    python benchmarks/fuzz_campaign.py [--cases N] [--seed S]

The cases come from tests/cli/fuzz_cases.py (the suite's fuzz test runs a few hundred of them): mutated
scenarios, sweeps, --set values, trace_view.json and kernel tables for import, calibrate and predict,
calibration YAMLs, summaries for report, records for load_result, hostile paths, and SIGINT, SIGTERM and SIGHUP
at random moments of a run. The process's address space is capped (4 GiB) so a blow-up is a MemoryError, not a
machine out of memory. Prints the counts per surface (ok, tracebacks, hangs past 10 s, memory blow-ups) and the
slowest case, records them in benchmarks/fuzz_campaign.json; exits 1 when any case is not clean.
"""
from __future__ import annotations

import argparse
import collections
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "cli"))

ADDRESS_SPACE = 4 << 30


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=31)
    args = ap.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (min(ADDRESS_SPACE, hard) if hard > 0 else ADDRESS_SPACE, hard))
    from fuzz_cases import SURFACES, campaign
    counts: dict[str, collections.Counter] = {s: collections.Counter() for s in SURFACES}
    bad = []
    t0 = time.perf_counter()

    def seen(i: int, o) -> None:
        counts[o.surface][o.status] += 1
        if o.status != "ok":
            bad.append(o)
            print(f"  case {i}: {o.surface}: {o.label}: {o.status}: {o.detail[:300]}", flush=True)
        if (i + 1) % 500 == 0:
            print(f"{i + 1} cases, {len(bad)} not clean, {time.perf_counter() - t0:.0f} s", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        outcomes = campaign(args.seed, args.cases, Path(tmp), on_case=seen)
    total = collections.Counter(o.status for o in outcomes)
    slow = max(outcomes, key=lambda o: o.seconds)
    print(f"\n{'surface':12s} {'cases':>6s} {'ok':>6s} {'traceback':>9s} {'hang':>5s} {'memory':>6s}")
    for s in SURFACES:
        c = counts[s]
        print(f"{s:12s} {sum(c.values()):6d} {c['ok']:6d} {c['traceback']:9d} {c['hang']:5d} {c['memory']:6d}")
    print(f"{'all':12s} {len(outcomes):6d} {total['ok']:6d} {total['traceback']:9d} {total['hang']:5d} "
          f"{total['memory']:6d}")
    print(f"seed {args.seed}; {time.perf_counter() - t0:.0f} s; slowest case {slow.seconds:.2f} s ({slow.surface}: "
          f"{slow.label})")
    record = {"cases": len(outcomes), "seed": args.seed, "seconds": round(time.perf_counter() - t0),
              "slowest_case_seconds": round(slow.seconds, 2),
              "counts": {s: {k: counts[s][k] for k in ("ok", "traceback", "hang", "memory")} for s in SURFACES},
              "total": {k: total[k] for k in ("ok", "traceback", "hang", "memory")},
              "not_clean": [f"{o.surface}: {o.label}: {o.status}: {o.detail[:200]}" for o in bad[:50]]}
    (ROOT / "benchmarks" / "fuzz_campaign.json").write_text(json.dumps(record, indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
