"""An imported task-queue profile carries its own Enqueue / Dequeue costs, and the replay charges them."""
from __future__ import annotations

from opsim.importer import import_profile
from opsim.scenario.runner import run_scenario


def test_the_scenario_names_the_profiles_queue_costs_and_the_replay_charges_them(trace, tmp_path):
    t = trace.call(7, "aclnnFoo", 1000.0, queue_tid=99)
    trace.call(7, "aclnnFoo", t + 100.0, queue_tid=99, phase1=False)
    sc = import_profile(trace.write(tmp_path / "trace_view.json")).scenario
    # the builder's Enqueue events last 2 us; each Dequeue@ lasts 16 us around a 10 us call
    assert sc["cost_overrides"] == {"enqueue": 2.0, "dequeue": 6.0}
    res = run_scenario(sc, write=False)
    host = res.sim.recorder.records("host")
    charged = [(t, p, d) for t, p, d in zip(host["thread"], host["phase"], host["dur"])
               if p in ("enqueue", "dequeue")]
    assert charged.count(("thread_7", "enqueue", 2.0)) == 2 and charged.count(("thread_99", "dequeue", 6.0)) == 2


def test_no_queue_no_queue_costs(trace, tmp_path):
    trace.call(7, "aclnnFoo", 1000.0)
    assert "cost_overrides" not in import_profile(trace.write(tmp_path / "trace_view.json")).scenario

