"""One point of a sweep, run wherever a worker is: scenario text + overrides in, one row's values out.

`run_point` is what travels to a Dask worker (by reference: the worker imports this module). Its task holds the
scenario's YAML text, never a local path, so any worker that has opsim installed can run it. The outcome holds
only values derived from the simulation, plus the point's wall seconds.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from opsim.errors import InvalidArgumentError, OpsimError

from opsim.sweeps.spec import ALL_RESULT_FIGURES

OK, SIM_ERRORS, FAILED = "ok", "errors", "failed"
"""Point status: ran clean; ran, but some calls failed (figures kept); could not run (no figures)."""


@dataclass(frozen=True)
class PointTask:
    """What a worker needs for one point."""

    index: int
    key: str
    scenario: str | Callable[[dict], Any]
    """The base scenario's YAML text, or a callable `overrides -> Result | Simulation` (in-process use)."""
    label: str
    overrides: dict[str, Any]
    figures: tuple[str, ...]
    calibration: Any = None
    """The point's calibration, loaded where the sweep started (a `Calibration`), or None."""
    max_bytes: int | None = None
    """The scenario's file budget (`--max-file-mib`); None: the default."""


@dataclass
class Outcome:
    """What comes back: the figure values (flat), status, error text and wall seconds."""

    index: int
    key: str
    figures: dict[str, Any]
    status: str
    error: str
    wall_seconds: float
    timing_sources: str = ""
    """Which sources answered the point's device time (``timing_source_label``); not a table column."""


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    """Nested summary values -> dotted columns; a list becomes its JSON text (one cell)."""
    if isinstance(value, Mapping):
        if prefix == "summary" and "wall" in value:
            value = {k: v for k, v in value.items() if k != "wall"}  # machine time: never in a row
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}", sub, out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = json.dumps(list(value), sort_keys=True, default=str)
    else:
        out[prefix] = value


def collect(result: Any, figures: tuple[str, ...]) -> dict[str, Any]:
    """The requested figures of one `Result`: `summary.<path>` fields (a mapping is flattened), `*` for every
    trace figure, or a trace figure by name. Raises `InvalidArgumentError` naming what is missing."""
    out: dict[str, Any] = {}
    summary = result.scenario_summary
    for name in figures:
        if name == "summary" and summary is None:
            continue  # a Simulation wrapped directly has no scenario summary
        if name.startswith("summary.") and summary is None:
            raise InvalidArgumentError(f"figure {name!r}: this run has no scenario summary (the callable returned a "
                                       "bare Simulation); collect trace figures instead")
        if name == "summary" or name.startswith("summary."):
            node: Any = summary
            for part in name.split(".")[1:]:
                if not isinstance(node, Mapping) or part not in node:
                    have = ", ".join(map(str, node)) if isinstance(node, Mapping) else "none (not a mapping)"
                    raise InvalidArgumentError(f"figure {name!r}: the summary has no field {part!r} here; its "
                                               f"fields: {have}")
                node = node[part]
            _flatten(name, node, out)
            continue
        if name == ALL_RESULT_FIGURES and not result.traced:
            continue  # every trace figure there is: none without a trace
        if not result.traced:
            raise InvalidArgumentError(f"figure {name!r} is derived from the trace and this scenario sets "
                                       "`trace: false`; collect summary.* figures, or set trace: true")
        if name == ALL_RESULT_FIGURES:
            out.update(result.figures)
        else:
            out[name] = result.figures[name]
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in out.items()}


def _result_of(task: PointTask) -> Any:
    # lazy: keeps opsim.api, opsim.scenario, opsim.trace out of importing opsim.sweeps.point
    from opsim.api import Result
    if callable(task.scenario):
        out = task.scenario(dict(task.overrides))
        if isinstance(out, Result):
            return out
        if hasattr(out, "recorder") and hasattr(out, "device"):
            return Result.from_simulation(out)
        raise InvalidArgumentError(f"the scenario callable returned {type(out).__name__}; return an opsim Result "
                                   "or a Simulation that has run")
    from opsim.scenario.loader import read_yaml  # lazy: keeps numpy, SimPy, PyYAML out of importing opsim.sweeps.point
    from opsim.scenario.limits import Limits  # lazy: as above
    from opsim.scenario.runner import run_scenario  # lazy: as above
    limits = Limits(file_bytes=task.max_bytes)
    data, _ = (read_yaml(task.scenario, task.label) if task.max_bytes is None else
               read_yaml(task.scenario, task.label, task.max_bytes))
    overrides = task.overrides
    if task.calibration is not None:
        data.pop("calibration", None)  # its path meant a file where the sweep started; the content came along
        overrides = {k: v for k, v in task.overrides.items() if k != "calibration"}
    return Result.from_run(run_scenario(data, overrides=overrides or None, write=False, calibration=task.calibration,
                                        limits=limits))


def run_point(task: PointTask, keep: list | None = None) -> Outcome:
    """Run one point and collect its figures. Never raises for a bad point: its status says `failed` and
    `error` says why (the sweep goes on). `keep`, in-process only, receives the `Result`."""
    t0 = time.perf_counter()
    try:
        result = _result_of(task)
        figures = collect(result, task.figures)
        summary = result.scenario_summary
        source = timing_source_label(summary) or ""
        errors = (summary.get("errors") or []) if summary is not None else []
        status, error = (SIM_ERRORS, f"{len(errors)} failed call(s); first: {errors[0].get('message', '')}") \
            if errors else (OK, "")
        if keep is not None:
            keep.append(result)
    except OpsimError as exc:
        figures, status, error, source = {}, FAILED, str(exc).strip() or type(exc).__name__, ""
    except Exception as exc:  # a simulator bug or a user callable's: recorded on the row, the sweep goes on
        figures, status, error, source = {}, FAILED, f"{type(exc).__name__}: {exc}", ""
    return Outcome(task.index, task.key, figures, status, error, time.perf_counter() - t0, source)


def timing_source_label(summary: Any) -> str | None:
    """'family model + built-in fits' (sources with at least 1% of device time, largest first, and the
    calibration's name) from a summary's ``device_timing``; None without one."""
    timing = summary.get("device_timing") if isinstance(summary, Mapping) else None
    if not isinstance(timing, Mapping):
        return None
    names = [k for k, v in (timing.get("sources") or {}).items() if v.get("share", 0) >= 0.01]
    label = " + ".join(names) or "none"
    return f"{label} (calibration: {timing['calibration']})" if timing.get("calibration") else label


def run_points(tasks: list[PointTask]) -> list[Outcome]:
    """Run a batch of points one after another (one Dask task for several short points)."""
    return [run_point(t) for t in tasks]


__all__ = ["PointTask", "Outcome", "run_point", "run_points", "collect", "OK", "SIM_ERRORS", "FAILED"]
