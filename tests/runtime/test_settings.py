"""SimulationSettings: one frozen settings object from the scenario to the Simulation, its process and threads."""
from __future__ import annotations

import dataclasses

import pytest
import simpy

from opsim.errors import InvalidArgumentError
from opsim.fastpath.environment import FastEnvironment
from opsim.opdev.settings import DEFAULT, SimulationSettings
from opsim.runtime.simulation import Simulation
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import simulation_settings

_SCENARIO = {"name": "s", "seed": 3, "threads": [{"name": "t", "streams": ["s0"], "program": [
    {"op": "Add", "shape": [8], "dtype": "float"}]}]}


def test_settings_are_frozen_and_their_tables_read_only():
    """Nothing changes a settings object once made: fields and the env / override tables refuse writes."""
    s = SimulationSettings(env={"ACLNN_CACHE_LIMIT": "8"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.fast_path = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.env["ACLNN_CACHE_LIMIT"] = "9"  # type: ignore[index]


def test_the_simulation_hands_its_settings_whole_to_process_and_threads():
    """The process keeps the very object the simulation was built from; threads read the fast path from it."""
    settings = SimulationSettings(trace=False, fast_path=False, deterministic_level=1)
    sim = Simulation(settings)
    assert sim.settings is settings and sim.process.settings is settings
    assert sim.process.deterministic_level == 1 and not sim.recorder.enabled
    th = sim.add_thread(lambda thread: iter(()), "t")
    assert th.fast_path is False and th.spend == sim.env.timeout


def test_fast_path_picks_the_environment():
    """fast_path: a FastEnvironment; off: plain SimPy (the reference path)."""
    assert type(Simulation().env) is FastEnvironment
    assert type(Simulation(fast_path=False).env) is simpy.Environment


def test_changes_by_name_and_unknown_names_refused():
    """Keyword changes replace fields of the defaults; an unknown name says which ones exist."""
    assert Simulation(numerics=True).settings == DEFAULT.but(numerics=True)
    with pytest.raises(InvalidArgumentError, match="unknown simulation setting.*fast_paht"):
        Simulation(fast_paht=False)


def test_a_scenario_becomes_one_settings_object(tmp_path):
    """The runner builds the settings from the scenario's configuration, fields one to one."""
    config = load_scenario(dict(_SCENARIO, fast_path=False, deterministic={"level": 2}, memory_strategy="best_fit"))
    s = simulation_settings(config, dump_dir=str(tmp_path))
    assert (s.fast_path, s.deterministic_level, s.memory_strategy, s.dump_dir) == (False, 2, "best_fit",
                                                                                    str(tmp_path))
    assert s.soc == config.soc and dict(s.env) == dict(config.env)
