"""Import cost against trace size: `opsim import` of N time-shifted copies of a real trace.

The trace is tests/data/real/trace_view_910b_mnist.json (one training step, 0.64 MB). Copy k is shifted by k
step spans (plus a 1 ms gap), its flow ids, queue correlation ids and ProfilerStep number made unique, so
the file is an N-step profile of the same run. Each size is imported in a fresh process (wall time and peak
RSS of that process); the cost per event should stay flat (10x events <= 12x time).

    python benchmarks/import_scale.py              # 1, 10, 100 copies (0.6, 6.4, 64 MB)
    python benchmarks/import_scale.py 1 10 100 1000 --keep /tmp/scale   # up to 0.64 GB
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "real" / "trace_view_910b_mnist.json"
GAP_US = Decimal(1000)


def _span(events: list[dict]) -> Decimal:
    times = [(Decimal(str(e["ts"])), Decimal(str(e.get("dur", 0)))) for e in events if "ts" in e]
    return max(t + d for t, d in times) - min(t for t, _ in times)


def _shifted(e: dict, k: int, shift: Decimal) -> dict:
    out = dict(e)
    if "ts" in out:
        out["ts"] = str(Decimal(str(out["ts"])) + shift * k)
    if "id" in out:
        out["id"] = f"{out['id']}_{k}"
    args = out.get("args")
    if isinstance(args, dict) and "correlation_id" in args:
        out["args"] = dict(args, correlation_id=int(args["correlation_id"]) + k * 10_000_000)
    if isinstance(args, dict) and isinstance(args.get("connection_id"), int):
        out["args"] = dict(out["args"], connection_id=args["connection_id"] + k * 10_000_000)
    name = out.get("name", "")
    if isinstance(name, str) and name.startswith("ProfilerStep#"):
        out["name"] = f"ProfilerStep#{int(name[13:]) + k}"
    return out


def write_copies(copies: int, out: Path, source: Path = SOURCE) -> Path:
    """An N-step trace_view.json built from `copies` time-shifted copies of `source` (written as it goes)."""
    events = json.loads(source.read_text())
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    shift = _span(body) + GAP_US
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w") as f:
        f.write("[\n")
        first = True
        for e in meta:
            f.write(("" if first else ",\n") + json.dumps(e))
            first = False
        for k in range(copies):
            f.write(",\n".join(json.dumps(_shifted(e, k, shift)) for e in body).join((",\n", "")))
        f.write("\n]\n")
    return out


_MEASURE = """
import json, resource, sys, time
from opsim.importer import import_profile
def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime
t, c = time.perf_counter(), cpu()
r = import_profile(sys.argv[1])
wall, c = time.perf_counter() - t, cpu() - c
print(json.dumps({"wall_s": wall, "cpu_s": c, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "calls": r.report.figures.get("calls")}))
"""


def measure(path: Path) -> dict:
    """Import `path` in a fresh process: wall seconds, peak RSS (MiB) and the calls imported."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("copies", nargs="*", type=int, default=[1, 10, 100])
    ap.add_argument("--keep", type=Path, help="write the traces here (default: a temporary directory)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        rows = []
        for n in args.copies:
            p = write_copies(n, base / f"x{n}" / "trace_view.json")
            m = measure(p)
            mb = p.stat().st_size / 1e6
            rows.append((n, mb, m))
            if not args.keep:
                p.unlink()
        first = rows[0]
        print("cpu s: user+system seconds of the importing process (steadier than wall on a loaded machine)")
        print(f"{'copies':>7s} {'MB':>8s} {'calls':>8s} {'wall s':>8s} {'cpu s':>8s} {'peak MiB':>9s} "
              f"{'cpu us/call':>12s} {'cpu per call vs 1st':>20s}")
        for n, mb, m in rows:
            per = m["cpu_s"] / m["calls"] * 1e6
            rel = (m["cpu_s"] / first[2]["cpu_s"]) / (n / first[0])
            print(f"{n:7d} {mb:8.1f} {m['calls']:8d} {m['wall_s']:8.2f} {m['cpu_s']:8.2f} {m['peak_mib']:9.0f} "
                  f"{per:12.1f} {rel:20.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
