"""`opsim sweep` and the sweep-file branch of `opsim validate`.

Exit codes as for `opsim run`: 0 every point ran (a point whose calls failed, e.g. out of memory, is a
result), 1 some point could not run (its row says why), 2 bad input, 130 interrupted (finished rows kept).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Callable, TextIO

DEFAULT_ROOT = Path("opsim-out") / "sweeps"
"""Results go to `opsim-out/sweeps/<sweep name>` unless `-o` names a directory."""


def add_parser(sub: argparse._SubParsersAction, add_file_budget: Callable[..., None]) -> None:
    """The `sweep` subcommand's arguments; `add_file_budget` is the CLI's one definition of --max-file-mib."""
    p = sub.add_parser("sweep", help="run every point of a sweep file, locally or on a Dask cluster",
                       description="Run a sweep file's points (docs/sweeps.md): one row per point in "
                                   "results.csv and results.parquet, written as points finish.")
    p.add_argument("sweep", help="sweep YAML file (see docs/sweeps.md)")
    p.add_argument("-o", "--out", metavar="DIR", help="results directory (default: opsim-out/sweeps/<name>)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="local Dask worker processes (0: run in this process; default: in this process unless "
                        "a local cluster pays, from the cores, the point count and a first point's time)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 (started with `dask scheduler`)")
    p.add_argument("--resume", action="store_true", help="keep the points already in DIR and run the rest")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_file_budget(p, "largest sweep file or scenario file read, e.g. a sweep over a long imported replay")


def validate(path: str, out: TextIO, max_bytes: int | None = None) -> int:
    """`opsim validate SWEEP.yaml`: the file, the base scenario and every parameter value (`max_bytes`: the
    file budget, --max-file-mib)."""
    from opsim.sweeps.spec import load_sweep  # lazy: each subcommand loads only what it runs
    spec = load_sweep(path) if max_bytes is None else load_sweep(path, max_bytes=max_bytes)
    n = len(spec.points())
    params = ", ".join(spec.params) or "no parameters"
    out.write(f"{path}: ok (sweep {spec.name}: {n} point(s) over {params}"
              f"{f' x {len(spec.seeds)} seed(s)' if spec.seeds else ''} on {spec.label})\n")
    return 0


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """`opsim sweep`."""
    from opsim.errors import InvalidArgumentError  # lazy: each subcommand loads only what it runs
    from opsim.sweeps.engine import SweepInterrupted, run_sweep  # lazy: each subcommand loads only what it runs
    from opsim.sweeps.point import FAILED, SIM_ERRORS  # lazy: each subcommand loads only what it runs
    from opsim.sweeps.results import CSV, PARQUET  # lazy: each subcommand loads only what it runs
    from opsim.sweeps.spec import load_sweep  # lazy: each subcommand loads only what it runs
    if args.scheduler and args.workers is not None:
        raise InvalidArgumentError("--workers sizes the local cluster; an existing cluster (--scheduler) has its "
                                   "own workers: drop one of the two")
    spec = load_sweep(args.sweep, max_bytes=args.max_file_mib << 20)
    target = Path(args.out) if args.out else DEFAULT_ROOT / spec.name
    t0 = time.perf_counter()
    try:
        df = run_sweep(spec, out=target, workers=args.workers, scheduler=args.scheduler, resume=args.resume,
                       progress=not args.no_progress, progress_file=err,
                       log=lambda s: err.write(s + "\n"))
    except SweepInterrupted as stop:
        err.write(f"opsim: interrupted; {stop.done} of {stop.points} points are done and kept in {target} "
                  "(run again with --resume to continue)\n")
        return 130
    counts = df["status"].value_counts()
    failed = int(counts.get(FAILED, 0))
    out.write(f"sweep {spec.name}: {len(df)} point(s): {int(counts.get('ok', 0))} ok, "
              f"{int(counts.get(SIM_ERRORS, 0))} with failed calls, {failed} could not run "
              f"({time.perf_counter() - t0:.1f} s)\nresults: {target / CSV}, {target / PARQUET}\n")
    if failed:
        first = df.loc[df["status"] == FAILED, "error"].iloc[0]
        err.write(f"opsim: {failed} point(s) could not run; first (point "
                  f"{df.index[df['status'] == FAILED][0]}): {first}\n")
        return 1
    return 0


__all__ = ["add_parser", "run", "validate", "DEFAULT_ROOT"]
