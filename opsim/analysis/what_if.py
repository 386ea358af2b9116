"""What-if loops: one scenario once per value of one parameter, into one tidy table, on the sweep engine."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pandas as pd

from opsim.errors import InvalidArgumentError
from opsim.sweeps.spec import ALL_RESULT_FIGURES, one_parameter


def what_if(scenario: Any, param: str, values: Iterable[Any], *, overrides: Mapping[str, Any] | None = None,
            summary: bool = True, on_result: Callable[[Any, Any], None] | None = None, workers: int | None = None,
            scheduler: Any = None) -> pd.DataFrame:
    """Run ``scenario`` once per value of ``param`` (a dotted override key such as
    ``"env.ACLNN_AICPU_CACHE_LIMIT"``) and return one row per value: a one-parameter sweep.

    ``scenario`` is a path, a scenario dict, or a callable that takes the overrides dict and returns a
    ``Result`` (or a finished ``Simulation``). Each row holds ``param`` (the value), the trace-derived figures
    (none for a scenario with ``trace: false``: ``makespan_us``, ``exec_hit_rate``, ``aicpu_hit_rate``,
    ``aicpu_oneshots``, ``peak_workspace_in_use_bytes``, ... the same names for every run), with ``summary``
    the scenario's own summary flattened with a ``summary.`` prefix, then ``status``, ``error`` and
    ``wall_seconds`` (see docs/sweeps.md). ``overrides`` apply to every run (for example
    ``{"profile": "aicpu-guide"}``); ``on_result(value, result)`` sees each ``Result`` (to keep or plot it).
    Runs are deterministic and, by default, one after another in this process; ``workers=N`` (local Dask
    worker processes) or ``scheduler=`` (an existing cluster) runs them on Dask like ``opsim.sweep``.
    """
    from opsim.sweeps.engine import run_sweep  # lazy: keeps opsim.sweeps out of importing opsim.analysis.what_if
    if not isinstance(param, str) or not param:
        raise InvalidArgumentError(f"what_if: param must be a dotted override key such as "
                                   f"'env.ACLNN_AICPU_CACHE_LIMIT', got {param!r}")
    values = list(values)
    if not values:
        raise InvalidArgumentError("what_if: values is empty; give at least one value to run")
    figures = (ALL_RESULT_FIGURES, "summary") if summary else (ALL_RESULT_FIGURES,)
    spec = one_parameter(str(scenario) if isinstance(scenario, Path) else scenario, param, values,
                         overrides=overrides, figures=figures)
    hook = (lambda point, result: on_result(values[point], result)) if on_result is not None else None
    if workers is None and scheduler is None:
        workers = 0  # in this process
    return run_sweep(spec, workers=workers, scheduler=scheduler, on_result=hook)
