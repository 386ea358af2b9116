"""`opsim validate` on a scenario with many `shape_choices`: wall time and peak memory at 20k, 200k and the
most a scenario file can hold, and how fast a file above the limits is refused.

    python benchmarks/validate_scale.py [--sizes 20000,200000,500000,2000000]

Each size runs `opsim validate` in its own process (peak RSS is that process's). A scenario file is at most
4 MiB and 1,000,000 values (opsim.scenario.limits), so about 500,000 two-value choices is the most one can
hold; 2,000,000 is refused by the size limit before it is parsed.
"""
from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scenario(path: Path, n: int) -> None:
    """`n` choices in flow style (the densest a file can hold them), distinct shapes."""
    choices = ",".join(f"[{i % 97 + 1}]" for i in range(n))
    path.write_text("name: big\nthreads:\n  - name: a\n    program:\n      - op: Add\n        dtype: float16\n"
                    f"        shape_choices: [{choices}]\n")


def measure(path: Path) -> tuple[float, float, int, str]:
    t0 = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = subprocess.run([sys.executable, "-m", "opsim", "validate", str(path)], capture_output=True, text=True,
                       cwd=ROOT)
    wall = time.perf_counter() - t0
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return wall, peak, r.returncode, (r.stdout + r.stderr).strip().splitlines()[-1][-110:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20000,200000,500000,2000000")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'choices':>9s} {'MiB file':>8s} {'wall s':>7s} {'peak MiB':>8s} exit  last line")
        for n in map(int, args.sizes.split(",")):
            p = Path(tmp) / f"s{n}.yaml"
            scenario(p, n)
            wall, peak, code, line = measure(p)
            print(f"{n:9d} {p.stat().st_size / 2**20:8.1f} {wall:7.2f} {peak:8.0f} {code:4d}  {line}", flush=True)


if __name__ == "__main__":
    main()
