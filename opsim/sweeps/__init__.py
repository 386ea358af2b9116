"""opsim.sweeps: many simulations of one scenario, from a sweep file, on a laptop or a Dask cluster.

`opsim.sweep("scenarios/sweeps/x.yaml")` returns one tidy row per point; `opsim sweep` is the same from the
command line. Dask (`dask[distributed]`) and pyarrow come with the `sweep` extra and are imported only when a
sweep runs on Dask or writes its results.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping
from opsim.sweeps.spec import Sweep, load_sweep

if TYPE_CHECKING:
    from opsim.sweeps.spec import Sweep

_SPEC_NAMES = ("DEFAULT_FIGURES", "Point", "Sweep", "is_sweep", "is_sweep_file", "load_sweep")


def __getattr__(name: str) -> Any:
    """The sweep-file names, imported on first use (so `opsim --help` does not load them)."""
    if name in _SPEC_NAMES:
        from opsim.sweeps import spec  # lazy: module __getattr__ (PEP 562): loaded when the name is first used
        return getattr(spec, name)
    raise AttributeError(f"module 'opsim.sweeps' has no attribute {name!r}")


def sweep(source: "str | Path | Mapping[str, Any] | Sweep", *, out: str | os.PathLike | None = None,
          workers: int | None = None, scheduler: Any = None, resume: bool = False, progress: bool = False,
          on_result: Callable[[int, Any], None] | None = None):
    """Run a sweep (a sweep file's path, the same structure as a dict, or a `Sweep`) and return its table
    (pandas DataFrame, index `point`: parameters, figures, status, error, wall_seconds).

    `workers`: local Dask worker processes (0 runs in this process, no Dask; default: in this process unless a
    local cluster pays, `opsim.sweeps.engine.choose_workers`);
    `scheduler`: an existing cluster's address (tcp://host:8786) or a `distributed.Client`; `out`: a directory
    for results.csv, results.parquet and the journal `--resume` reads; `on_result(point, Result)` sees each
    run's `Result` (with workers=0)."""
    from opsim.sweeps.engine import run_sweep  # lazy: keeps the engine out of `opsim --help`
    spec = source if isinstance(source, Sweep) else load_sweep(source)
    return run_sweep(spec, out=out, workers=workers, scheduler=scheduler, resume=resume, progress=progress,
                     on_result=on_result)


__all__ = ["sweep", "load_sweep", "Sweep", "Point", "is_sweep", "is_sweep_file", "DEFAULT_FIGURES"]
