"""What-if loops: run one scenario once per value of one parameter, in this process, into one tidy table."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from opsim.errors import InvalidArgumentError


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), sub, out)
    elif isinstance(value, (list, tuple)):
        out[prefix] = str(list(value))
    else:
        out[prefix] = value


def _run_one(scenario: Any, param: str, value: Any, base: Mapping[str, Any] | None) -> Any:
    """One run with ``param`` overridden. ``scenario`` may be a path, a scenario dict, or a callable that
    takes the overrides dict and returns a ``Result`` (or a finished ``Simulation``)."""
    from opsim.api import Result, run
    overrides = {**(base or {}), param: value}
    if callable(scenario):
        out = scenario(overrides)
        if isinstance(out, Result):
            return out
        if hasattr(out, "recorder") and hasattr(out, "device"):
            return Result.from_simulation(out)
        raise InvalidArgumentError(
            f"what_if: the scenario callable returned {type(out).__name__}; return an opsim Result or a "
            "Simulation that has run")
    return run(scenario, overrides, write=False)


def what_if(scenario: Any, param: str, values: Iterable[Any], *, overrides: Mapping[str, Any] | None = None,
            summary: bool = True, on_result: Callable[[Any, Any], None] | None = None) -> pd.DataFrame:
    """Run ``scenario`` once per value of ``param`` (a dotted override key such as
    ``"env.ACLNN_AICPU_CACHE_LIMIT"``) and return one row per value.

    Each row holds ``param`` (the value), the trace-derived figures (none for a scenario with ``trace: false``) (``makespan_us``, ``exec_hit_rate``,
    ``aicpu_hit_rate``, ``aicpu_oneshots``, ``peak_workspace_in_use_bytes``, ... the same names for every run) and,
    with ``summary``, the scenario's own summary figures flattened with a ``summary.`` prefix. Runs are
    sequential and deterministic; ``overrides`` are applied to every run (for example
    ``{"profile": "aicpu-guide"}``); ``on_result(value, result)`` sees each ``Result`` (to keep or plot it).
    """
    if not isinstance(param, str) or not param:
        raise InvalidArgumentError(f"what_if: param must be a dotted override key such as "
                                   f"'env.ACLNN_AICPU_CACHE_LIMIT', got {param!r}")
    values = list(values)
    if not values:
        raise InvalidArgumentError("what_if: values is empty; give at least one value to run")
    rows = []
    for value in values:
        result = _run_one(scenario, param, value, overrides)
        row: dict[str, Any] = {param: value, **(result.figures if result.traced else {})}
        if summary and result._summary:
            _flatten("summary", result._summary, row)
        if result.wall_seconds is not None:
            row["wall_seconds"] = result.wall_seconds
        rows.append(row)
        if on_result is not None:
            on_result(value, result)
    return pd.DataFrame(rows)
