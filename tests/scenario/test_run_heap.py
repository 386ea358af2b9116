"""A run's configuration and compiled programs are kept out of cyclic collections (opsim.scenario.heap): none while the
scenario compiles, frozen while it simulates, and the collector as it was afterwards."""
from __future__ import annotations

import gc

import pytest

from opsim.scenario import heap
from opsim.runtime.simulation import Simulation
from opsim.scenario import runner
from opsim.scenario.runner import run_scenario

SCENARIO = {"name": "heap", "seed": 1,
            "threads": [{"name": "t", "program": [{"loop": {"count": 3, "body": [{"op": "Add", "shape": [8, 8]}]}}]}]}


def _watch(monkeypatch) -> dict:
    seen: dict = {}
    start, sim_run = runner._start, Simulation.run

    def watched_start(*a, **k):
        seen["collecting while compiling"] = gc.isenabled()
        return start(*a, **k)

    def watched_run(self, *a, **k):
        seen["frozen while simulating"] = gc.get_freeze_count()
        return sim_run(self, *a, **k)
    monkeypatch.setattr(runner, "_start", watched_start)
    monkeypatch.setattr(Simulation, "run", watched_run)
    return seen


def test_a_run_compiles_uncollected_simulates_frozen_and_thaws(monkeypatch):
    assert gc.isenabled() and not gc.get_freeze_count()
    seen = _watch(monkeypatch)
    assert run_scenario(SCENARIO, write=False).ok
    assert seen["collecting while compiling"] is False
    assert seen["frozen while simulating"] > 0
    assert gc.isenabled() and not gc.get_freeze_count()


def test_a_callers_freeze_and_disabled_collector_are_left_alone(monkeypatch):
    gc.disable()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert run_scenario(SCENARIO, write=False).ok
        assert gc.get_freeze_count() > frozen // 2 and not gc.isenabled()  # (frozen objects freed leave it)
    finally:
        gc.unfreeze()
        gc.enable()


def test_a_failed_run_thaws(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("boom")
    monkeypatch.setattr(Simulation, "run", boom)
    with pytest.raises(RuntimeError):
        run_scenario(SCENARIO, write=False)
    assert gc.isenabled() and not gc.get_freeze_count()


def test_freeze_owner():
    assert heap.freeze() is True
    try:
        assert heap.freeze() is False  # a callee under the caller's freeze
        assert heap.freeze(True) is True
    finally:
        heap.thaw(True)
    assert not gc.get_freeze_count()
