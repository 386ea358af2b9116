"""`SimulationSettings`: a simulation's configuration as one frozen object.

A scenario's configuration (`opsim.scenario.config.ScenarioConfig`) becomes one `SimulationSettings`, which is
handed whole to `opsim.runtime.simulation.Simulation`, its `ProcessContext` and its host threads; none of them
takes the settings apart into keyword arguments or looks a setting up with a default of its own. What changes
while a simulation runs (switches set by ACL calls, counters) lives on the objects, not here.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Mapping

from opsim.errors import InvalidArgumentError


def _frozen(mapping: Mapping | None) -> Mapping:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class SimulationSettings:
    """Everything a simulation is built from (defaults: an uncalibrated Ascend910B2 with the full trace)."""

    soc: str = "Ascend910B2"
    """SoC preset name (`opsim list-socs`)."""
    soc_overrides: Mapping[str, Any] = field(default_factory=dict)
    """SocSpec fields replaced on the preset."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The process environment in force (opbase's variables)."""
    profile: Any = None
    """Behaviour profile (a name of opsim.opdev.profiles or a BehaviourProfile), None: the default."""
    numerics: bool = False
    """Run the operators' numerics on real bytes."""
    trace: bool = True
    """Keep every record (False: a disabled recorder)."""
    cost_overrides: Mapping[str, float] = field(default_factory=dict)
    """Cost-model numbers replaced."""
    dump_dir: str | None = None
    """Where op and overflow dumps go."""
    op_dump: bool = False
    overflow_dump: bool = False
    exception_dump: bool = False
    level2_profiling: bool = False
    record_op_args: bool = False
    memory_strategy: str = "first_fit"
    """HBM allocator: first_fit or best_fit."""
    calibration: Any = None
    """A calibration YAML path or a loaded Calibration, None: uncalibrated."""
    profiling_switch: int = 0
    """A profiler START command's switch at process start (0: profiling off)."""
    deterministic_level: int = 0
    strong_consistency: bool = False
    aic_num: int | None = None
    """AI Cores a phase 1 reports (None: the SoC's)."""
    aiv_num: int | None = None
    """Vector cores a phase 1 reports (None: the SoC's)."""
    fast_path: bool = True
    """The exact shortcuts of opsim.fastpath (False: the reference path, plain SimPy)."""
    device_id: int = 0
    """The NPU's id (a cluster's rank)."""
    slowdown: float = 1.0
    """Kernel time (AI Core, vector, AI CPU) of this device times this factor: a slower NPU (a cluster's what-if)."""

    def __post_init__(self) -> None:
        for name in ("soc_overrides", "env", "cost_overrides"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    def but(self, **changes: Any) -> SimulationSettings:
        """These settings with `changes` (names of fields); an unknown name is refused."""
        unknown = sorted(set(changes) - _FIELDS)
        if unknown:
            raise InvalidArgumentError(f"unknown simulation setting(s) {', '.join(unknown)}; use one of "
                                       f"{', '.join(sorted(_FIELDS))}")
        return replace(self, **changes) if changes else self


_FIELDS = frozenset(f.name for f in fields(SimulationSettings))
DEFAULT = SimulationSettings()
"""The default settings (one shared frozen object)."""
