"""A run's profiler output: one torch_npu ``*_ascend_pt`` directory, or one per rank of a job.

A single-rank run writes ``<name>_<timestamp>_ascend_pt`` as it always has. Every rank of a job writes
``<name>_rank<r>_<timestamp>_ascend_pt`` with its own ``profiler_info_<r>.json``, its device's files and its
communication files (opsim.trace.ascend_comm), the layout ``msprof-analyze cluster -d <outputs> -m all``
reads (docs/ascend-tools.md).
"""
from __future__ import annotations

from typing import Any, Sequence


def profiler_names(name: str, ranks: int | None) -> list[str]:
    """The profiler directories' name stems: the scenario's name, or one per rank of a job of `ranks` ranks."""
    return [name] if ranks is None else [f"{name}_rank{r}" for r in range(ranks)]


def profiler_dir_names(config: Any) -> list[str]:
    """The directories a run of `config` (the scenario's, with its `cluster`) writes."""
    # lazy: keeps numpy, sqlite3 out of importing opsim.scenario.profiler_outputs
    from opsim.trace.ascend_profiler import profiler_dir_name
    size = config.cluster.size if config.cluster is not None else None
    return [profiler_dir_name(n, config.epoch_us) for n in profiler_names(config.name, size)]


def write_profiler_outputs(runs: Sequence[Any], out: Any, profiler: str) -> None:
    """Write each run's profiler directory into the staged output directory `out` (`runs`: the single run, or
    every rank's run of a job in rank order); `profiler` is "text", "db" or "both"."""
    # lazy: keeps numpy, sqlite3 out of importing opsim.scenario.profiler_outputs
    from opsim.trace.ascend_profiler import (profile_stream_ids, profiled_kernel_types, profiler_dir_name,
                                             write_profiler_output)
    job = runs[0].cluster is not None
    cfg = runs[0].config
    for run, name in zip(runs, profiler_names(cfg.name, len(runs) if job else None)):
        out.path(profiler_dir_name(name, cfg.epoch_us))
        streams = dict(run.shared_streams)
        for wl in run.workloads:
            streams.update(wl.streams)
        write_profiler_output(run.sim, str(out.staging), name=name, epoch_us=cfg.epoch_us, rank=run.rank.index if job else 0,
                              text=profiler in ("text", "both"), db=profiler in ("db", "both"),
                              step_thread=run.config.outputs.step_thread, stream_ids=profile_stream_ids(streams),
                              kernel_types=profiled_kernel_types(run.config.data.get("profiled_ops")),
                              collectives=run.rank.collectives if job else None)


__all__ = ["profiler_names", "profiler_dir_names", "write_profiler_outputs"]
