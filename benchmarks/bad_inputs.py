"""Every bad input through the real command line: exit code, wall time and peak memory of each process.

    python benchmarks/bad_inputs.py

Runs `opsim validate` and `opsim run` (in a fresh process each) on every file of tests/data/bad/, on a file
just above the size limit, and `opsim validate --set ...` on the bad override values of
tests/cli/test_bad_inputs.py. Each must exit 2 with a one-line message, no traceback, within 5 s and under
500 MiB peak RSS (the process's ru_maxrss, interpreter and imports included). Prints one row per case and the
worst time and memory; exits 1 if any case misses.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "cli"))
sys.path.insert(0, str(ROOT / "tests" / "scenario"))

MAX_SECONDS = 5.0
MAX_RSS_MIB = 500.0


def measure(argv: list[str]) -> tuple[int, float, float, str]:
    """(exit code, wall seconds, peak RSS MiB, stderr) of one process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "opsim.cli", *argv], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    return proc.returncode, wall, usage.ru_maxrss / 1024.0, text


def cases(tmp: Path) -> list[tuple[str, list[str]]]:
    from test_bad_inputs import SET_CASES

    from opsim.yamlio.limits import MAX_FILE_BYTES
    out: list[tuple[str, list[str]]] = []
    for path in sorted((ROOT / "tests" / "data" / "bad").glob("*.yaml")):
        out.append((f"validate {path.name}", ["validate", str(path)]))
        out.append((f"run {path.name}", ["run", str(path), "--out", str(tmp / "out"), "--quiet", "--no-progress"]))
    big = tmp / "too_big.yaml"
    big.write_text("name: big\ndescription: '" + "x" * MAX_FILE_BYTES + "'\nthreads: []\n")
    out.append(("validate too_big.yaml", ["validate", str(big)]))
    quickstart = str(ROOT / "scenarios" / "quickstart.yaml")
    for i, value in enumerate(SET_CASES):
        out.append((f"validate --set #{i} {value[:40]}", ["validate", quickstart, "--set", value]))
    return out


def main() -> int:
    failed = 0
    worst_t = worst_m = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        all_cases = cases(Path(tmp))
        for label, argv in all_cases:
            code, wall, rss, err = measure(argv)
            problems = []
            if code != 2:
                problems.append(f"exit {code}")
            if "Traceback" in err or not err.startswith("opsim: error: "):
                problems.append("no one-line message")
            if wall > MAX_SECONDS:
                problems.append(f"{wall:.1f} s")
            if rss > MAX_RSS_MIB:
                problems.append(f"{rss:.0f} MiB")
            worst_t, worst_m = max(worst_t, wall), max(worst_m, rss)
            failed += bool(problems)
            print(f"{label[:60]:60s} exit {code}  {wall:5.2f} s  {rss:6.1f} MiB  {'; '.join(problems) or 'ok'}")
    print(f"{len(all_cases)} cases, {failed} failed; worst {worst_t:.2f} s, {worst_m:.1f} MiB "
          f"(limits {MAX_SECONDS} s, {MAX_RSS_MIB} MiB)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
