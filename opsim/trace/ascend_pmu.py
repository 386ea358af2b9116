"""PipeUtilization-style PMU figures of a simulated kernel, derived from the cost model's view of it.

Real kernel_details.csv and TASK_PMU_INFO carry per-pipe times the hardware counted; opsim derives the same
columns from how the cost model charged the kernel (see ``kernel_pmu``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from opsim.trace.ascend_model import AICPU_TASK_TYPES, PMU_COLUMNS, DeviceTaskRow, us_str
from opsim.trace.msprof_csv import total_cycles

_CUBE_TYPES = frozenset({"AI_CORE", "MIX_AIC"})
_VECTOR_TYPES = frozenset({"AI_VECTOR_CORE", "MIX_AIV"})
MIX_TYPES = frozenset({"MIX_AIC", "MIX_AIV"})


@dataclass(frozen=True, slots=True)
class PipeSplit:
    """PipeUtilization figures of one core side (AI Core "aic" or vector "aiv") of one kernel, in ns."""

    total_ns: int
    cycles: int
    pipe_ns: int
    """The side's main pipe: cube MAC on aic, vector on aiv."""
    scalar_ns: int

    @property
    def pipe_ratio(self) -> str:
        return _ratio(self.pipe_ns, self.total_ns)

    @property
    def scalar_ratio(self) -> str:
        return _ratio(self.scalar_ns, self.total_ns)


@dataclass(frozen=True, slots=True)
class KernelPmu:
    """A kernel's PMU-style split; a side is None when the kernel did not run on those cores."""

    aic: PipeSplit | None
    aiv: PipeSplit | None


def kernel_pmu(task: DeviceTaskRow, cost: Any, clock_mhz: float) -> KernelPmu | None:
    """PipeUtilization-style figures from the cost model's view of a kernel (None for AI CPU kernels).

    The cost model charges a kernel as dispatch latency (``aicore_launch_us``) plus an execution that runs
    its main pipe (cube MAC for AI Core kernels, vector for vector kernels) at the model's achieved
    efficiency (``aicore_efficiency`` / ``vector_efficiency``). So: core time = task duration, cycles = core
    time x clock, main-pipe time = execution x efficiency, scalar time = the dispatch latency. AI CPU
    kernels have no AI Core PMU (N/A in real profiles too).
    """
    if task.task_type in AICPU_TASK_TYPES:
        return None
    params = getattr(cost, "params", {}) if cost is not None else {}
    d = task.dur_ns
    launch = min(d, round(float(params.get("aicore_launch_us", 0.0)) * 1000.0))
    busy = d - launch
    tt = task.task_type
    cube = tt in _CUBE_TYPES or tt in MIX_TYPES or (tt not in _VECTOR_TYPES and task.unit_kind == "aicore")
    vector = tt in _VECTOR_TYPES or tt in MIX_TYPES or not cube
    cycles = total_cycles(d, clock_mhz)

    def side(active: bool, eff_key: str) -> PipeSplit | None:
        if not active:
            return None
        return PipeSplit(d, cycles, round(busy * float(params.get(eff_key, 1.0))), launch)

    return KernelPmu(side(cube, "aicore_efficiency"), side(vector, "vector_efficiency"))


def pmu_csv_values(pmu: KernelPmu | None) -> list[str]:
    """The PMU_COLUMNS cells of one kernel: N/A without PMU, zeros for a side the kernel did not use."""
    if pmu is None:
        return ["N/A"] * len(PMU_COLUMNS)
    out: list[str] = []
    for s in (pmu.aic, pmu.aiv):
        if s is None:
            out += ["0.000", "0", "0.000", "0.000", "0.000", "0.000"]
        else:
            out += [us_str(s.total_ns), str(s.cycles), us_str(s.pipe_ns), s.pipe_ratio, us_str(s.scalar_ns),
                    s.scalar_ratio]
    return out


def _ratio(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole > 0 else "0.000"
