"""Scenarios: the YAML format, its validation, seeded workload generation and the runner.

`load_scenario(path_or_dict, overrides)` validates a scenario (raising `opsim.errors.ScenarioError` with every
problem found); `run_scenario(path_or_dict, out_dir=..., overrides=..., progress=...)` runs it and writes its
outputs. Both are imported on first use so that `import opsim.scenario` stays cheap.
"""
from __future__ import annotations

_LAZY = {"load_scenario": "opsim.scenario.loader", "run_scenario": "opsim.scenario.runner",
         "RunResult": "opsim.scenario.runner", "ScenarioConfig": "opsim.scenario.config"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'opsim.scenario' has no attribute {name!r}")
    import importlib  # lazy: module __getattr__ (PEP 562): loaded when the name is first used
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = list(_LAZY)
