"""A simulation: one SimPy environment, one trace recorder, one device, one opbase process, host threads."""
from __future__ import annotations

from typing import Any, Callable, Generator, Mapping

import simpy

from opsim.acl.tensor import reset_host_pointers
from opsim.fastpath.environment import FastEnvironment
from opsim.opdev.process import ProcessContext
from opsim.runtime.host_thread import HostThread


class Simulation:
    """Owns the simulated world. Threads are added with `add_thread(program)`, then `run()`."""

    def __init__(self, *, soc: str = "Ascend910B2", soc_overrides: Mapping[str, Any] | None = None,
                 env: Mapping[str, str] | None = None, profile: str | None = None, numerics: bool = False,
                 trace: bool = True, cost_overrides: Mapping[str, float] | None = None,
                 stdout: Callable[[str], Any] | None = None, dump_dir: str | None = None, op_dump: bool = False,
                 overflow_dump: bool = False, memory_strategy: str = "first_fit", calibration: Any = None,
                 profiling_switch: int = 0, deterministic_level: int = 0, strong_consistency: bool = False,
                 fast_path: bool = True):
        from opsim.device.cost import CostModel
        from opsim.device.device import Device
        from opsim.device.soc import get_soc
        from opsim.trace.recorder import Recorder
        reset_host_pointers()
        self.fast_path = bool(fast_path)
        """Steady-state shortcuts that leave every output unchanged (False: the reference path, for debugging)."""
        self.env = FastEnvironment() if self.fast_path else simpy.Environment()
        """The fast path's environment (spends host time in place), else plain SimPy."""
        self.recorder = Recorder(enabled=trace)
        self.soc = get_soc(soc, **dict(soc_overrides or {}))
        from opsim.calibration import load_calibration
        #: the Calibration in use (a path or a loaded one was given), None when uncalibrated.
        self.calibration = load_calibration(calibration)
        self.cost = CostModel(self.soc, overrides=cost_overrides,
                              fitted=self.calibration.timing if self.calibration is not None else None)
        self.device = Device(self.env, self.soc, self.recorder, self.cost, numerics=numerics,
                             memory_strategy=memory_strategy)
        self.process = ProcessContext(env=env, profile=profile, cost=self.cost, recorder=self.recorder,
                                      device=self.device, numerics=numerics, stdout=stdout, dump_dir=dump_dir,
                                      op_dump=op_dump, overflow_dump=overflow_dump, profiling_switch=profiling_switch,
                                      deterministic_level=deterministic_level,
                                      strong_consistency=strong_consistency, fast_path=self.fast_path)
        self.threads: list[HostThread] = []

    def add_thread(self, program: Callable[[HostThread], Generator], name: str | None = None) -> HostThread:
        th = HostThread(self, program, name)
        self.threads.append(th)
        return th

    def run(self, until: float | None = None) -> float:
        """Run to completion (or `until`); returns the simulated makespan in microseconds."""
        self.env.run(until=until)
        for th in self.threads:
            if th.error is not None:
                raise th.error
        return self.env.now

    @property
    def now(self) -> float:
        return self.env.now
