"""Running a sweep: points out to an executor, rows back as they finish, into the table and the files.

Two executors, one loop: `inline` runs the points one after another in this process (what `what_if` uses by
default, and the only one that can hand back each `Result` or run a scenario given as a Python callable);
`dask` sends them to a Dask cluster, a local one started here or an existing one at a scheduler address. Given
no worker count, a sweep starts a local cluster only where `choose_workers` finds that it pays. Rows are
ordered by point number, never by arrival, so the table is the same whatever the executor, the worker count or
the order the points finish in; only `wall_seconds` is machine time.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import sys
import uuid
from typing import Any, Callable, Iterator, TextIO

from opsim.errors import InvalidArgumentError, OpsimError

from opsim.sweeps.point import FAILED, Outcome, PointTask, run_point, run_points
from opsim.sweeps.results import ResultsDir, frame, make_row
from opsim.sweeps.spec import Sweep

EXTRA_HINT = "install it with `pip install opsim[sweep]`"
CONNECT_TIMEOUT = "10s"
"""How long to wait for an existing cluster's scheduler to answer."""


def default_workers() -> int:
    """The cores this process may use (the most local worker processes a sweep starts)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


CLUSTER_START_SECONDS = 3.0
"""What a local cluster costs before its first point: each worker process starts, imports opsim and loads
Numba's cache (2.5 s for two workers on the loaded 2-core development machine, rounded up)."""
TIMED_POINTS = 2
"""Points a sweep without `workers` runs in this process first, to time one warm point (the first pays the
imports) before it decides whether a local cluster pays."""


def choose_workers(cores: int, points: int, point_seconds: float | None = None) -> int:
    """Local worker processes for `points` points on `cores` cores; 0 runs them in this process.

    One core stays with this process (Dask's scheduler, the rows, the files), so a cluster has at most
    cores - 1 workers, and never more than the points; fewer than two workers are no faster than this process
    and pay the cluster's start, so they mean 0. With `point_seconds` (a warm point's time here) the cluster
    must also win back its start: CLUSTER_START_SECONDS + points * point_seconds / workers must be less than
    points * point_seconds."""
    workers = min(cores - 1, points)
    if workers < 2:
        return 0
    if point_seconds is not None:
        inline = points * point_seconds
        if CLUSTER_START_SECONDS + inline / workers >= inline:
            return 0
    return workers


def _distributed():
    try:
        import distributed  # lazy: an optional dependency, looked for where it is used
    except ImportError:
        raise OpsimError(f"running a sweep on Dask needs dask[distributed]; {EXTRA_HINT} (or run in this process "
                         "with workers=0)") from None
    return distributed


def connect(workers: int | None, scheduler: Any) -> tuple[Any, Callable[[], None], str]:
    """(client, close, description): a client of the cluster at `scheduler` (an address such as
    tcp://host:8786, or a `distributed.Client`), else of a new local cluster of `workers` processes."""
    distributed = _distributed()
    if scheduler is not None and not isinstance(scheduler, str):
        if not isinstance(scheduler, distributed.Client):
            raise InvalidArgumentError(f"scheduler must be an address such as tcp://127.0.0.1:8786 or a "
                                       f"distributed.Client, got {type(scheduler).__name__}")
        return scheduler, lambda: None, f"the Dask cluster of {scheduler.scheduler.address}"
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if scheduler is not None:
        try:
            client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError, ValueError) as exc:
            raise InvalidArgumentError(f"cannot reach the Dask scheduler at {scheduler} ({exc}); start it with "
                                       "`dask scheduler` and give its tcp://host:port") from None
        return client, client.close, f"the Dask cluster at {scheduler}"
    n = workers or default_workers()
    if _bootstrapping():
        raise OpsimError(f"a worker process of a local Dask cluster tried to start a sweep: {GUARD_HINT}")
    try:
        with _workers_ignore_ctrl_c():
            cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                               host="127.0.0.1", dashboard_address=None,
                                               silence_logs=logging.CRITICAL)
    except (RuntimeError, OSError, TimeoutError) as exc:  # a worker process that did not come up in time
        raise OpsimError(f"could not start a local Dask cluster of {n} worker process(es) ({exc}); "
                         f"{_start_hint()}") from None
    client = distributed.Client(cluster)

    def close() -> None:
        # Closing under cancelled tasks (Ctrl-C) makes the in-process scheduler log tracebacks about comms that
        # close under it; they are our own shutdown, not a failure, so Dask's logs are off until it is done.
        log = logging.getLogger("distributed")
        level = log.level
        log.setLevel(logging.CRITICAL + 1)
        try:
            client.close()
            cluster.close()
        finally:
            log.setLevel(level)

    return client, close, f"a local Dask cluster of {n} worker process{'es' if n != 1 else ''}"


GUARD_HINT = ("a Python script that runs a sweep must do it under `if __name__ == \"__main__\":` (each local "
              "worker process imports the script again; docs/sweeps.md)")


def _unguarded_script() -> bool:
    """True inside a worker process that is importing the main script, or when the main script has no
    `__main__` test: the usual reason a local cluster does not start."""
    if _bootstrapping():
        return True
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    spec_name = getattr(getattr(main, "__spec__", None), "name", "") or ""
    if not path or not str(path).endswith(".py") or spec_name.endswith(".__main__"):
        return False  # a package's __main__ (python -m opsim) is never imported again by a worker
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "__main__" not in fh.read(1 << 20)
    except OSError:
        return False


def _bootstrapping() -> bool:
    """True while a new process is importing the parent's main script (multiprocessing's own test)."""
    import multiprocessing  # lazy: keeps multiprocessing out of importing opsim.sweeps.engine
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))


def _start_hint() -> str:
    if _unguarded_script():
        return f"{GUARD_HINT}; or use workers=0 (--workers 0) to run the points in this process"
    return "run again, or use --workers 0 to run the points in this process"


@contextlib.contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """Start worker processes with SIGINT ignored (an ignored signal stays ignored in a child), so Ctrl-C in a
    terminal, which reaches the whole process group, stops only this process; it then shuts the workers down."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not ours to change
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class _CtrlC:
    """While a sweep runs, Ctrl-C raises KeyboardInterrupt as usual and is also remembered: an interrupt that
    lands where Python swallows exceptions (a garbage-collector callback of Dask's) still stops the sweep
    after the next finished point."""

    def __init__(self) -> None:
        self.pressed = False
        self._previous: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        self.pressed = True
        raise KeyboardInterrupt

    def __enter__(self) -> "_CtrlC":
        try:
            self._previous = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread
            self._previous = None
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def check(self) -> None:
        if self.pressed:
            raise KeyboardInterrupt


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep, after its finished rows were written: how many points are done, of how many."""

    def __init__(self, done: int, points: int):
        super().__init__(f"{done} of {points} points done")
        self.done, self.points = done, points


def _inline(tasks: list[PointTask], on_result: Callable[[int, Any], None] | None) -> Iterator[Outcome]:
    for task in tasks:
        keep: list = []
        outcome = run_point(task, keep if on_result is not None else None)
        if on_result is not None and keep:
            on_result(task.index, keep[0])
        yield outcome


BATCH_SECONDS = 0.5
"""About how long one Dask task should run: short points travel in batches so that the scheduler's per-task
cost (a few milliseconds, and on a small machine a share of the workers' cores) stays small beside the work."""


def batch_size(point_seconds: float, remaining: int, workers: int) -> int:
    """Points per Dask task, from how long a first point took: enough for BATCH_SECONDS of work, one for points
    that long or longer, and never so many that a worker is left idle (at least two batches per worker)."""
    by_time = int(BATCH_SECONDS / point_seconds) if point_seconds > 0 else remaining
    most = max(1, math.ceil(remaining / (2 * max(1, workers))))
    return max(1, min(by_time, most))


def _workers(client: Any) -> int:
    try:
        return max(1, len(client.scheduler_info().get("workers", {})))
    except Exception:  # pragma: no cover - an old or unusual client
        return 1


def _on_dask(client: Any, tasks: list[PointTask]) -> Iterator[Outcome]:
    """Submit one point per worker, then the rest in batches sized by how long the first point took (see
    `batch_size`); yield outcomes as they finish; on any exit (Ctrl-C included) cancel what is left."""
    from distributed import as_completed  # lazy: keeps Dask out of importing opsim.sweeps.engine
    token = uuid.uuid4().hex[:8]
    n = _workers(client)
    futures: dict[Any, list[PointTask]] = {}

    def submit(batch: list[PointTask]) -> Any:
        future = client.submit(run_points, batch, key=f"opsim-points-{batch[0].index}-{token}", pure=False)
        futures[future] = batch
        return future

    first, rest = tasks[:n], tasks[n:]
    queue = as_completed([submit([t]) for t in first])
    try:
        for future in queue:
            batch = futures[future]
            try:
                outcomes = future.result()
            except Exception as exc:  # the worker died or the task could not travel: failed points
                outcomes = [Outcome(t.index, t.key, {}, FAILED, f"{type(exc).__name__}: {exc}", 0.0) for t in batch]
            if rest:
                size = batch_size(max(o.wall_seconds for o in outcomes), len(rest), n)
                for i in range(0, len(rest), size):
                    queue.add(submit(rest[i:i + size]))
                rest = []
            yield from outcomes
    finally:
        client.cancel(list(futures))


AUTO_INFO = "in this process, or on a local cluster where it pays (docs/sweeps.md, \"How many workers\")"


def _auto(tasks: list[PointTask], chosen: dict[str, str]) -> Iterator[Outcome]:
    """The points of a sweep given no `workers`: in this process unless `choose_workers` finds that a local
    cluster pays, first from the cores and the point count, then from a warm point's time; `chosen["info"]`
    says where they ran."""
    cores = default_workers()
    chosen["info"] = "in this process"
    if not choose_workers(cores, len(tasks)) or not _have_distributed():
        yield from _inline(tasks, None)
        return
    outcomes = list(_inline(tasks[:TIMED_POINTS], None))
    yield from outcomes
    rest = tasks[TIMED_POINTS:]
    workers = choose_workers(cores, len(rest), outcomes[-1].wall_seconds)
    if not workers:
        yield from _inline(rest, None)
        return
    client, close, info = connect(workers, None)
    chosen["info"] = f"{TIMED_POINTS} point(s) in this process, then on {info}"
    try:
        yield from _on_dask(client, rest)
    finally:
        close()


def _have_distributed() -> bool:
    try:
        # lazy: an optional dependency, looked for where it is used
        import distributed  # noqa: F401
    except ImportError:
        return False
    return True


def run_sweep(sweep: Sweep, *, out: str | os.PathLike | None = None, workers: int | None = None,
              scheduler: Any = None, resume: bool = False, progress: bool = False, progress_file: TextIO | None = None,
              on_result: Callable[[int, Any], None] | None = None,
              on_row: Callable[[dict[str, Any]], None] | None = None, log: Callable[[str], None] | None = None):
    """Run every point of `sweep` (those not already in `out` with `resume`) and return the table.

    `workers=0` runs in this process; `workers=N` or `scheduler` on Dask (see `connect`); no `workers`: as
    `choose_workers` decides (in this process unless a local cluster pays). `on_result(point, Result)` needs
    `workers=0`. `on_row` sees each finished row. On Ctrl-C the finished rows are written out before the
    KeyboardInterrupt goes on up."""
    points = sweep.points()
    if not points:
        raise InvalidArgumentError(f"sweep {sweep.name!r} has no points (an axis with no values?)")
    workers, inline, auto = _executor(sweep, workers, scheduler, on_result)
    store = ResultsDir(out, sweep) if out is not None else None
    rows, tasks = _plan(sweep, points, store.finished(resume) if store is not None else {})
    sources: dict[int, str] = {}  # point -> the timing sources of its device time (points run now)
    bar = None
    close = lambda: None  # noqa: E731
    info = "in this process"
    interrupted = False
    ctrl_c = _CtrlC()
    chosen = {"info": AUTO_INFO}
    try:
        if tasks and not inline and not auto:
            client, close, info = connect(workers, scheduler)
            info = f"on {info}"
        elif auto and tasks:
            info = AUTO_INFO
        if store is not None:
            store.start()
            store.write_tables(frame(sweep, rows.values()))  # the files exist from the start
        if log is not None:
            log(f"sweep {sweep.name}: {len(points)} points, {len(rows)} already done, {len(tasks)} to run {info}")
        bar = _bar(len(points), len(rows), progress, progress_file)
        outcomes = (_inline(tasks, on_result) if inline else _auto(tasks, chosen) if auto
                    else _on_dask(client, tasks) if tasks else iter(()))
        by_index = {p.index: p for p in points}
        try:
            with ctrl_c:
                for outcome in outcomes:
                    if outcome.timing_sources:
                        sources[outcome.index] = outcome.timing_sources
                    row = make_row(by_index[outcome.index], outcome)
                    rows[outcome.index] = row
                    if store is not None:
                        store.append(row)
                        if store.due():
                            store.write_tables(frame(sweep, rows.values()))
                    if bar is not None:
                        bar.update(1)
                    if on_row is not None:
                        on_row(row)
                    ctrl_c.check()
        finally:
            if hasattr(outcomes, "close"):
                outcomes.close()
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        try:
            if store is not None and store.started:
                store.write_tables(frame(sweep, rows.values()))
                store.close()
        finally:
            if bar is not None:
                bar.close()
            close()
            if interrupted:
                raise SweepInterrupted(len(rows), len(points))
    df = frame(sweep, rows.values())
    df.attrs.update({"executor": chosen["info"] if auto and tasks else info, "points": len(points)})
    warning = mixed_sources_warning(sources.values())
    if warning:
        df.attrs["warnings"] = [warning]
        if log is not None:
            log(f"warning: {warning}")
    return df


def _executor(sweep: Sweep, workers: int | None, scheduler: Any, on_result: Any) -> tuple[int | None, bool, bool]:
    """(workers, in this process?, chosen automatically?): the executor the arguments ask for, checked."""
    auto = workers is None and scheduler is None
    if auto and (on_result is not None or callable(sweep.scenario)):
        workers = 0  # only this process can hand back a Result or call a Python scenario
    inline = workers == 0
    if not inline and (on_result is not None or callable(sweep.scenario)):
        raise InvalidArgumentError("on_result and a scenario given as a Python callable need workers=0 (in this "
                                   "process); a Dask sweep takes a scenario file or dict")
    if workers is not None and workers < 0:
        raise InvalidArgumentError(f"workers must be >= 0 (0: in this process), got {workers}")
    if inline and scheduler is not None:
        raise InvalidArgumentError("workers=0 runs in this process; drop it to use the scheduler")
    return workers, inline, auto


def _plan(sweep: Sweep, points: list, done: dict) -> tuple[dict[int, dict[str, Any]], list[PointTask]]:
    """(point index -> its row, for the points already `done`; the tasks of the others)."""
    rows: dict[int, dict[str, Any]] = {}
    tasks = []
    calibrations: dict[Any, Any] = {}
    for p in points:
        key = sweep.point_key(p)
        if key in done:
            old = done[key]
            rows[p.index] = make_row(p, Outcome(p.index, key, old.get("figures") or {}, old["status"],
                                                old.get("error") or "", float(old.get("wall_seconds") or 0.0)))
        else:
            tasks.append(PointTask(p.index, key, sweep.scenario, sweep.label, p.overrides, sweep.figures,
                                   _calibration(sweep, p, calibrations), sweep.max_bytes))
    return rows, tasks


def mixed_sources_warning(labels: Any) -> str | None:
    """A warning when the points' device times came from different timing sources (``timing_source_label``
    of each point; their comparison then mixes models, not only what the sweep varies); None when all agree."""
    seen: dict[str, int] = {}
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
    if len(seen) < 2:
        return None
    parts = "; ".join(f"{n} point(s): {label}" for label, n in sorted(seen.items(), key=lambda kv: -kv[1]))
    return (f"the points' device times come from different timing sources ({parts}); differences between them "
            f"mix timing models, not only what the sweep varies")


def _calibration(sweep: Sweep, point: Any, cache: dict[Any, Any]) -> Any:
    """The point's calibration file, loaded once here (workers get its content, not its path)."""
    if callable(sweep.scenario):
        return None
    path = sweep.calibration_file(point)
    if path is None:
        return None
    if path not in cache:
        # lazy: keeps numpy, ijson, sqlite3, SimPy, decimal out of importing opsim.sweeps.engine
        from opsim.calibration import load_calibration
        cache[path] = load_calibration(path)
    return cache[path]


def _bar(total: int, initial: int, enabled: bool, file: TextIO | None):
    if not enabled:
        return None
    from tqdm import tqdm  # lazy: keeps tqdm out of importing opsim.sweeps.engine
    return tqdm(total=total, initial=initial, unit="point", file=file or sys.stderr, dynamic_ncols=True,
                mininterval=0.5, desc="sweep")


__all__ = ["run_sweep", "connect", "choose_workers", "default_workers", "SweepInterrupted"]
