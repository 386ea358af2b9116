"""A simulation: one SimPy environment, one trace recorder, one device, one opbase process, host threads."""
from __future__ import annotations

from typing import Any, Callable, Generator

import simpy

from opsim.acl.tensor import reset_host_pointers
from opsim.device.cost import CostModel
from opsim.device.device import Device
from opsim.device.soc import get_soc
from opsim.fastpath.environment import FastEnvironment
from opsim.opdev.process import ProcessContext
from opsim.opdev.settings import DEFAULT, SimulationSettings
from opsim.runtime.host_thread import HostThread
from opsim.trace.recorder import Recorder, RecordSink


class Simulation:
    """Owns the simulated world. Threads are added with `add_thread(program)`, then `run()`."""

    def __init__(self, settings: SimulationSettings | None = None, *, stdout: Callable[[str], Any] | None = None,
                 record_sink: RecordSink | None = None, clock: simpy.Environment | None = None, **changes: Any):
        """`settings` (the defaults when None) with `changes` by field name (`Simulation(trace=False)`);
        `stdout` takes the text opbase prints; `record_sink` takes the records instead of the recorder's columns
        (a run that keeps only the summary's totals); `clock`: a SimPy environment shared with other simulations
        (a cluster's ranks), else one of its own."""
        settings = (settings or DEFAULT).but(**changes)
        self.settings = settings
        """What the simulation was built from (frozen; handed whole to the process and the host threads)."""
        reset_host_pointers()
        self.fast_path = bool(settings.fast_path)
        """Steady-state shortcuts that leave every output unchanged (False: the reference path, for debugging)."""
        self.env = clock if clock is not None else FastEnvironment() if self.fast_path else simpy.Environment()
        """The fast path's environment (spends host time in place), else plain SimPy."""
        self.recorder = Recorder(enabled=settings.trace, sink=record_sink)
        self.soc = get_soc(settings.soc, **dict(settings.soc_overrides))
        #: the Calibration in use (a path or a loaded one was given), None when uncalibrated.
        self.calibration = None
        if settings.calibration is not None:
            from opsim.calibration import load_calibration  # lazy: an uncalibrated run never loads the fit
            self.calibration = load_calibration(settings.calibration)
        self.cost = CostModel(self.soc, overrides=settings.cost_overrides or None,
                              fitted=self.calibration.timing if self.calibration is not None else None)
        self.device = Device(self.env, self.soc, self.recorder, self.cost, numerics=settings.numerics,
                             memory_strategy=settings.memory_strategy, device_id=settings.device_id)
        self.process = ProcessContext(settings, cost=self.cost, recorder=self.recorder, device=self.device,
                                      stdout=stdout)
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
