"""Speed and memory of the streaming profile readers at 1x, 10x and 100x (up to a million rows):

    python benchmarks/readers.py [--scale 1,10,100] [--base 10000] [--json OUT]

For each reader a file of base x scale rows is made by repeating real rows (the db excerpt and the
api_statistic.csv of the AlexNet profile, the real kernel_details_910b_training.csv), then read in a fresh
subprocess that reports rows per second and its peak resident memory (VmHWM: ru_maxrss would include the
parent's at fork): linear cost shows as a flat rate,
bounded memory as a flat peak. Also timed: calibration.host.queue_phases on a trace of base x scale queued
calls (linear since the dequeue sweep; it was quadratic). Figures on a shared machine are noisy: compare
the rates of one run with each other.
"""
from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "data" / "real"
DB = REAL / "ascend_pytorch_profiler_alexnet_rank0_excerpt.db"

_CHILD = r"""
import sys, time
sys.path.insert(0, {root!r})
from opsim.ingest import iter_api_statistic, iter_db_kernels, iter_db_api_events, iter_op_summary
reader = {{"db kernels": iter_db_kernels, "db CANN_API": iter_db_api_events, "op_summary": iter_op_summary,
          "api_statistic": iter_api_statistic}}[{kind!r}]
t = time.perf_counter()
n = sum(1 for _ in reader({path!r}))
dt = time.perf_counter() - t
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))  # this process's own peak
print(n, dt, hwm)
"""


def make_db(path: Path, copies: int) -> Path:
    """The excerpt's kernels and host calls repeated `copies` times (new ids, the real values)."""
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute(f"ATTACH '{DB}' AS s")
    con.executescript("CREATE TABLE STRING_IDS AS SELECT * FROM s.STRING_IDS;"
                      "CREATE TABLE ENUM_API_TYPE AS SELECT * FROM s.ENUM_API_TYPE;"
                      "CREATE TABLE TASK AS SELECT * FROM s.TASK WHERE 0;"
                      "CREATE TABLE COMPUTE_TASK_INFO AS SELECT * FROM s.COMPUTE_TASK_INFO WHERE 0;"
                      "CREATE TABLE CANN_API AS SELECT * FROM s.CANN_API WHERE 0;")
    con.execute("WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
                "INSERT INTO TASK SELECT t.startNs + k.i * 1000000000, t.endNs + k.i * 1000000000, t.deviceId, "
                "t.connectionId, t.globalTaskId + k.i * 100000, t.globalPid, t.taskType, t.contextId, t.streamId, "
                "t.taskId, t.modelId, t.depth FROM s.TASK t, k", (copies - 1,))
    con.execute("WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
                "INSERT INTO COMPUTE_TASK_INFO SELECT c.name, c.globalTaskId + k.i * 100000, c.blockDim, "
                "c.mixBlockDim, c.taskType, c.opType, c.inputFormats, c.inputDataTypes, c.inputShapes, "
                "c.outputFormats, c.outputDataTypes, c.outputShapes, c.attrInfo, c.waitNs "
                "FROM s.COMPUTE_TASK_INFO c, k", (copies - 1,))
    con.execute("WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i < ?) "
                "INSERT INTO CANN_API SELECT a.startNs + k.i * 1000000000, a.endNs + k.i * 1000000000, a.type, "
                "a.globalTid, a.connectionId + k.i * 100000, a.name, a.depth FROM s.CANN_API a, k", (copies - 1,))
    con.commit()
    con.execute("DETACH s")
    con.close()
    return path


def make_csv(src: Path, path: Path, rows: int) -> Path:
    lines = src.read_text(encoding="utf-8-sig").splitlines()
    body = lines[1:]
    with open(path, "w", encoding="utf-8") as f:
        f.write(lines[0] + "\n")
        for i in range(rows):
            f.write(body[i % len(body)] + "\n")
    return path


def run_child(kind: str, path: Path) -> dict:
    code = _CHILD.format(root=str(ROOT), kind=kind, path=str(path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    n, dt, rss = int(out[0]), float(out[1]), int(out[2])
    return {"rows": n, "seconds": round(dt, 3), "us_per_row": round(1e6 * dt / max(n, 1), 2),
            "peak_rss_mib": round(rss / 1024, 1)}


def queue_phase_time(n: int) -> float:
    sys.path.insert(0, str(ROOT))
    from opsim.calibration.host import queue_phases
    from opsim.ingest.trace_view import TraceEvent, TraceView
    ev = []
    for i in range(n):
        t = 100_000 * i
        ev += [TraceEvent("Enqueue", 1, 7, t, 4_000, args={"correlation_id": i}, index=4 * i),
               TraceEvent("Dequeue@aclnnAdd", 1, 9, t + 5_000, 20_000, args={"correlation_id": i}, index=4 * i + 1),
               TraceEvent("AscendCL@aclnnAdd", 2, 9, t + 10_000, 10_000, index=4 * i + 2),
               TraceEvent("AscendCL@aclrtLaunchKernel", 2, 9, t + 12_000, 2_000, index=4 * i + 3)]
    trace = TraceView(path=Path("synthetic"), events=ev, flows=[], process_names={}, thread_names={})
    t0 = time.perf_counter()
    queue_phases(trace)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="1,10,100")
    ap.add_argument("--base", type=int, default=10_000, help="rows at scale 1 (default 10000)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    scales = [int(s) for s in args.scale.split(",")]
    import tempfile
    res: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for scale in scales:
            n = args.base * scale
            db = make_db(Path(tmp) / "p.db", max(1, n // 35))  # the excerpt has 35 kernels, 120 CANN_API rows
            files = {"db kernels": db, "db CANN_API": db,
                     "op_summary": make_csv(REAL / "kernel_details_910b_training.csv", Path(tmp) / "k.csv", n),
                     "api_statistic": make_csv(REAL / "api_statistic_alexnet_rank0.csv", Path(tmp) / "a.csv", n)}
            for kind, path in files.items():
                r = run_child(kind, path)
                res.setdefault(kind, {})[f"{scale}x"] = r
                print(f"{kind:14s} {scale:4d}x  {r['rows']:8d} rows  {r['seconds']:8.2f} s  {r['us_per_row']:7.2f} "
                      f"us/row  peak RSS {r['peak_rss_mib']:6.1f} MiB", flush=True)
            dt = queue_phase_time(min(n, 100_000))
            res.setdefault("queue_phases", {})[f"{scale}x"] = {"calls": min(n, 100_000), "seconds": round(dt, 3)}
            print(f"{'queue_phases':14s} {scale:4d}x  {min(n, 100_000):8d} calls {dt:8.2f} s", flush=True)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
