"""Import cost against trace size: `opsim import` of N time-shifted copies of a real trace.

The trace is tests/data/real/trace_view_910b_mnist.json (one training step, 0.64 MB). Copy k is shifted by k
step spans (plus a 1 ms gap), its flow ids, queue correlation ids and ProfilerStep number made unique, so
the file is an N-step profile of the same run. Each size is imported in a fresh process (wall time and peak
RSS of that process); the cost per event should stay flat (10x events <= 12x time).

    python benchmarks/import_scale.py              # 1, 10, 100 copies (0.6, 6.4, 64 MB)
    python benchmarks/import_scale.py 1 10 100 1000 --keep /tmp/scale   # up to 0.64 GB

`--kernels` measures the kernels-only import instead (a kernel table without a host trace): the rows of the
real tests/data/real/kernel_details_910b_training.csv copied with their start times shifted by the table's
span (plus the same 1 ms gap) until the table has the given number of rows, each imported with `opsim import
TABLE -o SCENARIO` (the scenario written) in a fresh process; peak memory should stay flat:

    python benchmarks/import_scale.py --kernels 10000 100000 1000000
    python benchmarks/import_scale.py --db 1 10 100   # the SQLite export: copies of the AlexNet rank-0 db

With --db the profile is tests/data/real/ascend_pytorch_profiler_alexnet_rank0_import.db (one AlexNet step:
121 calls, 552 device tasks, 0.4 MB), copied N times the same way (`write_db_copies`: times shifted by the
step's span, connection, task and op ids made unique, one ProfilerStep name per copy).
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "data" / "real" / "trace_view_910b_mnist.json"
KERNELS = ROOT / "tests" / "data" / "real" / "kernel_details_910b_training.csv"
DB_SOURCE = ROOT / "tests" / "data" / "real" / "ascend_pytorch_profiler_alexnet_rank0_import.db"
_ID_STRIDE = 10_000_000
_DB_TIMES = ("startNs", "endNs")
_DB_IDS = {"PYTORCH_API": ("connectionId",), "CONNECTION_IDS": ("id", "connectionId"), "CANN_API": ("connectionId",),
           "TASK": ("connectionId", "globalTaskId"), "COMPUTE_TASK_INFO": ("globalTaskId",),
           "COMMUNICATION_TASK_INFO": ("globalTaskId", "opId"), "COMMUNICATION_OP": ("connectionId", "opId"),
           "STEP_TIME": ()}
"""Per copied table, the id columns made unique per copy (other tables are copied once)."""
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


def write_kernel_rows(rows: int, out: Path, source: Path = KERNELS) -> Path:
    """A kernel table of `rows` rows: copies of `source`'s rows, copy k shifted by k spans (plus a 1 ms gap)."""
    with open(source, newline="", encoding="utf-8-sig") as f:
        header, *body = list(csv.reader(f))
    at = next(header.index(n) for n in ("Start Time(us)", "Task Start Time(us)") if n in header)
    dur = next(header.index(n) for n in ("Duration(us)", "Task Duration(us)") if n in header)
    starts = [Decimal(r[at].strip()) for r in body]
    shift = max(s + Decimal(r[dur].strip()) for s, r in zip(starts, body)) - min(starts) + GAP_US
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for i in range(rows):
            k, j = divmod(i, len(body))
            row = list(body[j])
            row[at] = str(starts[j] + shift * k)
            w.writerow(row)
    return out


_CLOCKS = """
import io, json, resource, sys, time
def cpu():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime
t, c = time.perf_counter(), cpu()
"""
"""The start of every measured script: a fresh process's clocks, read again after its one import."""

_IMPORT = _CLOCKS + """
from opsim.cli import main
err = io.StringIO()
code = main(["import", sys.argv[1], "-o", sys.argv[2]], stdout=io.StringIO(), stderr=err)
wall, c = time.perf_counter() - t, cpu() - c
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"wall_s": wall, "cpu_s": c, "peak_mib": hwm / 1024, "exit": code, "err": err.getvalue()[:300]}))
"""


def _fresh(script: str, *args: Path) -> dict:
    """`script` (printing one JSON line last) run in a fresh process with opsim from this checkout."""
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, env=env,
                         check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def measure_kernels(table: Path, scenario: Path) -> dict:
    """`opsim import table -o scenario` in a fresh process: wall and CPU seconds, peak RSS (MiB), exit code."""
    return _fresh(_IMPORT, table, scenario)


def kernels_main(sizes: list[int], keep: Path | None) -> int:
    """The kernels-only import at each size: its cost per row should stay flat, its peak memory too."""
    with tempfile.TemporaryDirectory() as tmp:
        base = keep or Path(tmp)
        rows = []
        for n in sizes:
            table = write_kernel_rows(n, base / f"k{n}" / "kernel_details.csv")
            scenario = base / f"k{n}" / "scenario.yaml"
            m = measure_kernels(table, scenario)
            rows.append((n, table.stat().st_size / 1e6, scenario.stat().st_size / 1e6 if scenario.exists() else 0, m))
            if not keep:
                table.unlink()
                scenario.unlink(missing_ok=True)
        first = rows[0]
        print("cpu s: user+system seconds of the importing process (steadier than wall on a loaded machine)")
        print(f"{'rows':>8s} {'MB in':>7s} {'MB out':>7s} {'wall s':>8s} {'cpu s':>8s} {'peak MiB':>9s} "
              f"{'cpu us/row':>11s} {'cpu per row vs 1st':>19s} exit")
        for n, mb, mb_out, m in rows:
            rel = (m["cpu_s"] / first[3]["cpu_s"]) / (n / first[0])
            print(f"{n:8d} {mb:7.1f} {mb_out:7.1f} {m['wall_s']:8.2f} {m['cpu_s']:8.2f} {m['peak_mib']:9.0f} "
                  f"{m['cpu_s'] / n * 1e6:11.1f} {rel:19.2f} {m['exit']:4d} {m['err'].strip()[:160]}")
    return 0


def write_db_copies(copies: int, out: Path, source: Path = DB_SOURCE) -> Path:
    """An N-step profiler db built from `copies` time-shifted copies of `source` (all in SQL, nothing held)."""
    import sqlite3
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    con = sqlite3.connect(out)
    con.execute(f"ATTACH DATABASE '{source}' AS s")
    lo, hi = con.execute("SELECT MIN(startNs), MAX(endNs) FROM s.TASK").fetchone()
    shift = hi - lo + 1_000_000
    step_id, step_name = con.execute("SELECT id, value FROM s.STRING_IDS WHERE value LIKE 'ProfilerStep#%'").fetchone()
    top = con.execute("SELECT MAX(id) FROM s.STRING_IDS").fetchone()[0]
    tables = [r[0] for r in con.execute("SELECT name FROM s.sqlite_master WHERE type = 'table'")]
    for t in tables:
        con.execute(con.execute("SELECT sql FROM s.sqlite_master WHERE name = ?", (t,)).fetchone()[0])
        if t not in _DB_IDS:
            con.execute(f"INSERT INTO main.{t} SELECT * FROM s.{t}")
    con.executemany("INSERT INTO main.STRING_IDS VALUES (?, ?)",
                    [(top + 1 + k, f"ProfilerStep#{int(step_name[13:]) + k}") for k in range(copies)])
    for t, ids in _DB_IDS.items():
        cols = [r[1] for r in con.execute(f"PRAGMA s.table_info({t})")]
        for k in range(copies):
            exprs = []
            for c in cols:
                if c in _DB_TIMES:
                    exprs.append(f"CAST({c} AS INTEGER) + {k * shift}")
                elif c in ids:
                    exprs.append(f"{c} + {k * _ID_STRIDE}")
                elif t == "PYTORCH_API" and c == "name":
                    exprs.append(f"CASE WHEN name = {step_id} THEN {top + 1 + k} ELSE name END")
                elif t == "STEP_TIME" and c == "id":
                    exprs.append(f"id + {k}")
                else:
                    exprs.append(c)
            con.execute(f"INSERT INTO main.{t} SELECT {', '.join(exprs)} FROM s.{t}")
    con.commit()
    con.execute("DETACH DATABASE s")
    con.close()
    return out


_MEASURE = _CLOCKS + """
from opsim.importer import import_profile
r = import_profile(sys.argv[1])
wall, c = time.perf_counter() - t, cpu() - c
print(json.dumps({"wall_s": wall, "cpu_s": c, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "calls": r.report.figures.get("calls")}))
"""


def measure(path: Path) -> dict:
    """Import `path` in a fresh process: wall seconds, peak RSS (MiB) and the calls imported."""
    return _fresh(_MEASURE, path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("copies", nargs="*", type=int)
    ap.add_argument("--keep", type=Path, help="write the traces here (default: a temporary directory)")
    ap.add_argument("--kernels", action="store_true", help="the sizes are kernel table rows: measure the "
                    "kernels-only import")
    ap.add_argument("--db", action="store_true", help="copies of the AlexNet db export instead of the MNIST trace")
    args = ap.parse_args(argv)
    if args.kernels:
        return kernels_main(args.copies or [10_000, 100_000, 1_000_000], args.keep)
    with tempfile.TemporaryDirectory() as tmp:
        base = args.keep or Path(tmp)
        rows = []
        for n in args.copies or [1, 10, 100]:
            p = (write_db_copies(n, base / f"x{n}" / "ascend_pytorch_profiler_0.db") if args.db
                 else write_copies(n, base / f"x{n}" / "trace_view.json"))
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
