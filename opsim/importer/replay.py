"""Import a profile, replay it, and measure the replay against the original (benchmarks, notebook, tests)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping
from opsim.importer import import_profile, write_import


def replay_and_compare(profile: str | Path, out_dir: str | Path, *,
                       overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`opsim import` then `opsim run --profiler-output`; returns the comparison (opsim.importer.compare)."""
    # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer.replay
    from opsim.importer.compare import compare
    # lazy: keeps numpy, ijson, sqlite3, decimal out of importing opsim.importer.replay
    from opsim.ingest import locate_profile
    # lazy: keeps numpy, SimPy, PyYAML out of importing opsim.importer.replay
    from opsim.scenario.runner import run_scenario
    out = Path(out_dir)
    imported = write_import(import_profile(profile), out / "imported.yaml")
    result = run_scenario(imported.scenario_path, out_dir=out / "replay", overrides=overrides,
                          profiler_output=True)
    replay_trace = next((out / "replay").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"))
    comparison = compare(locate_profile(profile).host_source, replay_trace)
    comparison["scenario"] = str(imported.scenario_path)
    comparison["replay_trace"] = str(replay_trace)
    comparison["summary"] = result.summary
    return comparison


__all__ = ["replay_and_compare"]
