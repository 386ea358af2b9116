"""The checks of a scenario that need more than its schema: every value a run would refuse is refused here,
before anything is simulated, so `opsim validate` and `opsim run` refuse the same inputs.

They reuse the simulator's own validation (`get_soc` for SoC overrides, `CostModel` for cost overrides,
`load_calibration` for the calibration file), so a bound lives in one place, and add the scenario-wide
budgets of `opsim.scenario.limits`: stream count, call count, simulated horizon, numerics host memory, and
where outputs and dumps may be written.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping

from opsim.errors import InvalidArgumentError, CalibrationError
from opsim.scenario import config
from opsim.scenario.limits import MAX_HORIZON_US, Limits
from opsim.acl.dtypes import DataType
from opsim.outputs import output_dir_problem
from opsim.safe_io import path_problem

Add = Callable[[tuple, str], None]


def check_scenario(data: Mapping[str, Any], threads: list[config.ThreadConfig], add: Add, limits: Limits, *,
                   deferred_ops: bool = False, calibration: str | None = None,
                   every_rank: list[config.ThreadConfig] | None = None) -> None:
    """Report (through `add(field path, message)`) every bound the scenario exceeds. `calibration` is the
    resolved path of its calibration file, read as a run would read it; `every_rank`: a job's threads over all
    its ranks, what the call and numerics budgets count (None: a single rank's `threads`)."""
    if calibration is not None:
        _check_calibration(calibration, add)
    soc = _check_soc(data, add)
    _check_cost(data, soc, add)
    if soc is not None:
        _check_streams(data, threads, soc, add)
    _check_paths(data, add)
    budgeted = threads if every_rank is None else every_rank
    _check_calls(budgeted, add, limits)
    _check_horizon(data, threads, add)
    if data.get("numerics") and not deferred_ops:
        _check_numerics(budgeted, add, limits)


def _check_calibration(path: str, add: Add) -> None:
    # lazy: keeps ijson, sqlite3, SimPy, decimal out of importing opsim.scenario.checks
    from opsim.calibration import load_calibration
    try:
        load_calibration(path)
    except CalibrationError as exc:
        add(("calibration",), str(exc))


def _check_soc(data: Mapping[str, Any], add: Add) -> Any:
    from opsim.device.soc import get_soc  # lazy: keeps SimPy out of importing opsim.scenario.checks
    name = data.get("soc", "Ascend910B2")
    overrides = dict(data.get("soc_overrides") or {})
    ok = True
    for k, v in overrides.items():
        try:
            get_soc(name, **{k: v})
        except InvalidArgumentError as exc:
            add(("soc_overrides", k), str(exc))
            ok = False
    if not ok:
        return None
    try:
        return get_soc(name, **overrides)
    except InvalidArgumentError as exc:
        add(("soc_overrides",), str(exc))
        return None


def _check_cost(data: Mapping[str, Any], soc: Any, add: Add) -> None:
    from opsim.device.cost import CostModel  # lazy: keeps SimPy out of importing opsim.scenario.checks
    for k, v in dict(data.get("cost_overrides") or {}).items():
        try:
            CostModel(soc, {k: v})
        except InvalidArgumentError as exc:
            add(("cost_overrides", k), str(exc))


def _check_streams(data: Mapping[str, Any], threads: list[config.ThreadConfig], soc: Any, add: Add) -> None:
    """The run creates each top-level (shared) stream once and each thread's other streams per thread."""
    shared = set(s for s in (data.get("streams") or ()) if isinstance(s, str))
    total = len(shared)
    counts = [len([s for s in th.streams if s not in shared]) for th in threads]
    for i, n in enumerate(counts):
        total += n
        if total > soc.max_streams:
            add(("threads", i, "streams"), f"the scenario creates {len(shared) + sum(counts)} streams; {soc.name} "
                                           f"supports {soc.max_streams} (max_streams): use fewer streams or raise "
                                           "soc_overrides.max_streams")
            return
    if total > soc.max_streams:
        add(("streams",), f"the scenario creates {total} streams; {soc.name} supports {soc.max_streams} "
                          "(max_streams): use fewer streams or raise soc_overrides.max_streams")


def _check_paths(data: Mapping[str, Any], add: Add) -> None:
    dump_dir = (data.get("dump") or {}).get("dir")
    problem = path_problem(dump_dir) if isinstance(dump_dir, str) else None
    if problem:
        add(("dump", "dir"), problem)
    elif isinstance(dump_dir, str) and os.path.isabs(dump_dir):
        problem = output_dir_problem(dump_dir)
        if problem:
            add(("dump", "dir"), problem)
    elif isinstance(dump_dir, str):
        norm = os.path.normpath(dump_dir)
        if norm == ".." or norm.startswith(".." + os.sep) or norm == ".":
            add(("dump", "dir"), f"{dump_dir!r} leaves the output directory; a relative dump.dir names a "
                                 "directory inside it (e.g. dump), an absolute path any other place")
    out_dir = (data.get("outputs") or {}).get("dir")
    if isinstance(out_dir, str):
        problem = output_dir_problem(out_dir)
        if problem:
            add(("outputs", "dir"), problem)


def _check_calls(threads: list[config.ThreadConfig], add: Add, limits: Limits) -> None:
    per_thread = [config.program_calls(th.program, 1) for th in threads]
    total = sum(per_thread)
    if total <= limits.max_calls:
        return
    i = max(range(len(threads)), key=per_thread.__getitem__)
    program = threads[i].program
    j = max(range(len(program)), key=lambda k: config.program_calls(program[k:k + 1], 1))
    where = ("threads", i, "program", j) + (("loop", "count") if isinstance(program[j], config.LoopStep) else
                                            ("repeat",) if isinstance(program[j], config.OpStep) else ())
    add(where, f"an estimated {total:.4g} calls ({total} counting each loop iteration at least "
                                   f"once, loops x bodies) exceed the call budget of {limits.max_calls:.4g}; lower "
                                   "the loop counts or raise --max-calls")


TRACE_MAX_US = 10 ** 12
"""Longest time trace.json writes exactly (opsim.trace.timefmt.JSON_US_MAX ns, about 11.6 days); a test pins
that the two agree."""


def _horizon(data: Mapping[str, Any]) -> tuple[float, str]:
    """(longest time the run's outputs can express in us, what sets it)."""
    outputs = data.get("outputs") if isinstance(data.get("outputs"), dict) else {}
    return output_horizon(bool(data.get("trace", True)) and bool(outputs.get("trace", True)))


def output_horizon(writes_trace_json: bool) -> tuple[float, str]:
    """(longest simulated time, in us, the outputs express exactly, what sets it): trace.json's bound when it is
    written, else the simulated time's own (2**53 ns: the profiler's nanosecond columns and databases hold the
    epoch plus that, see MAX_EPOCH_US)."""
    if writes_trace_json:
        return TRACE_MAX_US, (f"the longest time trace.json writes exactly ({TRACE_MAX_US:.0e} us); or write no "
                              "trace.json (`outputs: {trace: false}`)")
    return MAX_HORIZON_US, f"the longest simulated time of {MAX_HORIZON_US} us (2**53 ns)"


def check_run_horizon(end_us: float, writes_trace_json: bool) -> None:
    """After simulating, before any output is written: a run whose simulated time went past what its outputs
    express is refused in one line (SoC rates overridden near 0 make every kernel long, which no check before
    simulating can bound), instead of failing inside a writer."""
    bound, why = output_horizon(writes_trace_json)
    if not end_us <= bound:
        raise InvalidArgumentError(
            f"the run reached {end_us:.4g} us of simulated time, beyond {why}; no output is written. Check "
            "soc_overrides (a clock, bandwidth or core count near 0 makes every kernel long) and cost_overrides, "
            "or shorten the scenario")


_UNIT_TIME = {"clock_mhz": (1.0, "cycle"), "hbm_bandwidth_gbps": (1e-3, "byte of HBM traffic"),
              "h2d_bandwidth_gbps": (1e-3, "byte copied host to device"),
              "d2h_bandwidth_gbps": (1e-3, "byte copied device to host"), "peak_fp16_flops": (1e6, "flop")}
"""SoC rate fields: (us one unit of work lasts at a rate of 1 in the field's unit, the unit). A rate so low
that one unit outlasts what the outputs express would make the run refuse after simulating (every kernel does
at least a cycle's work and moves bytes); it is refused here instead."""


def _check_horizon(data: Mapping[str, Any], threads: list[config.ThreadConfig], add: Add) -> None:
    """Sleeps, and each call's time-valued cost overrides, must fit the times the outputs can express: a run
    refuses them only after simulating, when it writes them."""
    bound, why = _horizon(data)
    from opsim.device.cost import HOST_PHASES  # lazy: keeps SimPy out of importing opsim.scenario.checks
    per_call = 0.0
    for k, v in dict(data.get("soc_overrides") or {}).items():
        per_unit = _UNIT_TIME.get(k)
        if per_unit is not None and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 \
                and per_unit[0] / v > bound:
            add(("soc_overrides", k), f"{v:.4g} makes one {per_unit[1]} last {per_unit[0] / v:.4g} us, beyond {why}; "
                                      "give a rate a device could have")
    for k, v in dict(data.get("cost_overrides") or {}).items():
        if (k in HOST_PHASES or k.endswith("_us")) and isinstance(v, (int, float)) and not isinstance(v, bool):
            if v > bound:
                add(("cost_overrides", k), f"{v:.4g} us is beyond {why}; give a smaller value")
            per_call = max(per_call, float(v))
    for i, th in enumerate(threads):
        t = config.sleep_us(th.program)
        if t > MAX_HORIZON_US:
            add(("threads", i, "program"), f"the sleeps alone last {t:.4g} us, beyond the longest simulated time "
                                           f"of {MAX_HORIZON_US} us (2**53 ns); shorten the sleeps or the loops")
        elif t + per_call * config.program_calls(th.program) > bound:
            add(("threads", i, "program"), f"the sleeps and the cost overrides alone last "
                                           f"{t + per_call * config.program_calls(th.program):.4g} us, beyond {why}; "
                                           "shorten the sleeps, the loops or the overrides")


def numerics_bytes(threads: list[config.ThreadConfig]) -> int:
    """Host bytes `numerics: true` needs for tensor data: every variant's inputs and outputs of every thread
    (each is created once and kept), plus the largest input's random-number scratch (float64 + float32)."""
    total = 0
    scratch = 0
    for th in threads:
        for step in config.op_steps(th.program):
            for shapes in step.shape_sets:
                for dtype in step.dtypes:
                    dt = DataType.parse(dtype)
                    out = step.spec.infer(list(shapes), step.attrs)
                    out_dt = DataType.parse(step.spec.output_dtype(dtype, step.attrs))
                    for s in shapes:
                        n = _numel(s)
                        total += n * dt.numpy_dtype.itemsize
                        scratch = max(scratch, 12 * n)
                    for s in (out if isinstance(out, list) else []):
                        total += _numel(s) * out_dt.numpy_dtype.itemsize
    return total + scratch


def _numel(shape: Any) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _check_numerics(threads: list[config.ThreadConfig], add: Add, limits: Limits) -> None:
    need = numerics_bytes(threads)
    if need > limits.numerics_bytes:
        add(("numerics",), f"true needs an estimated {need / 2**20:.1f} MiB of host memory for tensor data, "
                           f"above the budget of {limits.numerics_bytes / 2**20:.0f} MiB; use smaller shapes, "
                           "numerics: false (timing only) or raise --max-numerics-mib")


__all__ = ["check_scenario", "check_run_horizon", "numerics_bytes", "output_horizon"]
