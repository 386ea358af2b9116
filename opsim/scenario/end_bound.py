"""An upper bound of a scenario's simulated end, for `opsim validate`: what `opsim run` refuses after simulating
(a time beyond what its outputs express, `checks.check_run_horizon`) is refused before, without the full run.

Simulated time only advances while a host thread or a device unit is busy or a thread sleeps, so the end is at
most the sum, over every rank's threads, of their host busy time, their device tasks' durations (times the
rank's `slowdown`) and their sleeps. Each distinct op call (op, shapes, dtype, attributes, repeat, cache mode)
is measured once by a probe: one simulation with one thread per such call, each making it once on a fresh
process (a cache miss, the costliest case) through the same predictor, SoC, overrides, calibration and env as
the run. Every other step (sync, events, profiling switches) is bounded by the costliest host phase, replayed
tasks by their durations. The bound is conservative: a scenario near the limit may be refused by validate and
still run; the message says so and how to proceed.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from opsim.errors import OpsimError, ScenarioError
from opsim.scenario import config
from opsim.scenario.checks import scenario_horizon


def _key(step: config.OpStep, shapes: tuple, dtype: str, cache_mode: str) -> tuple:
    return (step.op, step.stream, shapes, dtype, repr(sorted(step.attrs.items())), step.repeat,
            step.cache_mode or cache_mode)


def _variants(threads: list[config.ThreadConfig]) -> dict[tuple, tuple[config.OpStep, str]]:
    """Each distinct op call of the threads -> (a single-variant step making it, the thread's cache mode)."""
    found: dict[tuple, tuple[config.OpStep, str]] = {}
    for th in threads:
        for step in config.op_steps(th.steps()):
            for shapes in step.shape_sets:
                for dtype in step.dtypes:
                    key = _key(step, shapes, dtype, th.cache_mode)
                    if key not in found:
                        found[key] = (replace(step, shape_sets=(shapes,), dtypes=(dtype,)), th.cache_mode)
    return found


def probe_calls(cfg: config.ScenarioConfig, variants: dict[tuple, tuple[config.OpStep, str]]
                ) -> tuple[dict[tuple, tuple[float, float]], float]:
    """({call key: (host busy us, device busy us) of one such call}, the costliest host phase in us)."""
    from opsim.scenario.runner import run_scenario  # lazy: only a validation with op calls simulates
    keys = list(variants)
    threads = tuple(config.ThreadConfig(name=f"probe{i}", streams=(step.stream,),
                                        program=(step, config.SyncDeviceStep()), cache_mode=mode)
                    for i, (step, mode) in enumerate(variants[k] for k in keys))
    probe = replace(cfg, threads=threads, events=(), shared_streams=(), cluster=None, ranks=(), numerics=False,
                    trace=False, dump=config.DumpConfig(), on_error="continue", fast_path=False,
                    outputs=replace(cfg.outputs, step_thread=None, profiler=""))
    result = run_scenario(probe, write=False)
    summary = result.summary
    device: dict[str, float] = {}
    for row in summary["streams"].values():
        device[row["thread"]] = device.get(row["thread"], 0.0) + float(row["busy_us"])
    names = {f"probe{i}" for i in range(len(keys))}
    # torch_npu's task-queue consumer works for every queued call: each call is charged all of its work
    others = sum(float(row["host_busy_us"]) for name, row in summary["threads"].items() if name not in names)
    per_call = {k: (float(summary["threads"][f"probe{i}"]["host_busy_us"]) + others, device.get(f"probe{i}", 0.0))
                for i, k in enumerate(keys)}
    host_max = max(result.sim.process.cost.host_us.values(), default=0.0)
    return per_call, host_max


def _steps_bound(steps: tuple, cache_mode: str, per_call: dict, host_max: float, slowdown: float) -> float:
    total = 0.0
    for step in steps:
        if isinstance(step, config.OpStep):
            total += max(h + d * slowdown for shapes in step.shape_sets for dtype in step.dtypes
                         for h, d in [per_call[_key(step, shapes, dtype, cache_mode)]])
        elif isinstance(step, config.LoopStep):
            total += step.count * _steps_bound(step.body, cache_mode, per_call, host_max, slowdown)
        elif isinstance(step, config.ChooseStep):
            total += max(_steps_bound((o,), cache_mode, per_call, host_max, slowdown) for o in step.options)
        elif isinstance(step, config.SleepStep):
            total += step.us
        elif isinstance(step, config.TaskStep):
            total += host_max + step.duration_us * slowdown
        elif isinstance(step, config.TasksStep):
            total += host_max + sum(t.duration_us for t in step.tasks if isinstance(t, config.TaskStep)) * slowdown
        else:
            total += host_max
    return total


def end_bound(cfg: config.ScenarioConfig) -> float:
    """An upper bound (us) of the simulated end of `cfg`'s run (see the module docstring)."""
    ranks = [(cfg.rank_threads(r), cfg.rank_config(r).slowdown) for r in range(cfg.rank_count)]
    variants = _variants([th for threads, _ in ranks for th in threads])
    per_call, host_max = probe_calls(cfg, variants) if variants else ({}, 0.0)
    return sum(host_max * 4 + _steps_bound(th.steps(), th.cache_mode, per_call, host_max, slowdown)
               for threads, slowdown in ranks for th in threads)


def check_end_bound(cfg: config.ScenarioConfig, label: str) -> None:
    """Refuse (ScenarioError naming `label`) a scenario whose simulated end may pass what its outputs express."""
    if cfg.direct_invoke_module:
        return  # its ops are user code, which validation never runs; the run checks its end
    bound, why = scenario_horizon(cfg.data)
    try:
        end = end_bound(cfg)
    except OpsimError:
        return  # a call the probe cannot make alone (it failed, not the scenario): the run checks its end
    if end > bound:
        raise ScenarioError(
            f"{label}: the run may reach {end:.4g} us of simulated time (its op calls' predicted host and device "
            f"times x their counts, plus sleeps: an upper bound), beyond {why}. Check soc_overrides (a clock, "
            "bandwidth or core count near 0 makes every kernel long) and cost_overrides, or shorten the loops")


__all__ = ["check_end_bound", "end_bound", "probe_calls"]
