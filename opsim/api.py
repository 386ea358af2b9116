"""The Python API users call from a notebook: ``run`` a scenario, ``load_result`` a finished one.

``Result`` and ``load_result`` live in ``opsim.scenario.result`` (below the runner, which writes a run's records
with them); they are re-exported here.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from opsim.scenario.result import RECORDS_FILE, Result, load_result


def _merge_overrides(overrides: Mapping[str, Any] | None, more: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(overrides or {})
    for key, value in more.items():
        merged[key.replace("__", ".")] = value
    return merged


def run(scenario_or_path: Any, overrides: Mapping[str, Any] | None = None, *,
        out_dir: str | os.PathLike | None = None, write: bool = True, progress: bool = False,
        calibration: Any = None, **more: Any) -> Result:
    """Run a scenario (a YAML path or a scenario dict) in this process and return its ``Result``.

    Overrides use the scenario's dotted keys, given as a dict (``overrides={"env.ACLNN_AICPU_CACHE_LIMIT": "64"}``)
    or as keywords with ``__`` for the dots (``env__ACLNN_AICPU_CACHE_LIMIT="64"``). The outputs go where the
    CLI puts them (``out_dir``, else the scenario's ``outputs.dir``, else ``opsim-out/<name>``), together with
    ``records.json.gz`` for ``load_result`` (``opsim run`` writes the same files); ``write=False`` keeps
    everything in memory. ``calibration`` (a calibration YAML from ``opsim calibrate``, or a ``Calibration``)
    gives the run measured timing.
    A bad scenario raises ``ScenarioError`` naming every problem.
    """
    from opsim.scenario.runner import run_scenario  # lazy: keeps numpy, SimPy, PyYAML out of importing opsim.api
    merged = _merge_overrides(overrides, more)
    run_result = run_scenario(scenario_or_path, out_dir=out_dir, overrides=merged or None, progress=progress,
                              write=write, calibration=calibration)
    return Result.from_run(run_result)


__all__ = ["RECORDS_FILE", "Result", "load_result", "run"]
