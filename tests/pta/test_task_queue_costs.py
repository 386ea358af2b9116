"""torch_npu's task queue costs host time: `enqueue` on the issuing thread per queued job, `dequeue` before
and `dequeue gap` after each job on the consumer thread (defaults: medians of the public real trace)."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsim.calibration.host import QUEUE_PHASES, queue_phases
from opsim.device.cost import HOST_PHASES
from opsim.ingest import read_trace_view
from opsim.scenario.runner import run_scenario

from pta_helpers import Harness

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "trace_view_910b_mnist.json"


def _spans(h: Harness, phase: str) -> list[tuple[str, float]]:
    host = h.sim.recorder.records("host")
    return [(t, d) for t, p, d in zip(host["thread"], host["phase"], host["dur"]) if p == phase]


def _three_adds(h: Harness):
    def body(th, stream):
        for _ in range(3):
            yield from h.add(th, stream)
    return body


def test_each_queued_call_charges_enqueue_on_the_caller_and_dequeue_on_the_consumer():
    h = Harness(env={"TASK_QUEUE_ENABLE": "1"})
    h.run(_three_adds(h))
    assert _spans(h, "enqueue") == [("py", HOST_PHASES["enqueue"][0])] * 3
    assert _spans(h, "dequeue") == [("task_queue", HOST_PHASES["dequeue"][0])] * 3
    assert _spans(h, "dequeue gap") == [("task_queue", HOST_PHASES["dequeue gap"][0])] * 3
    # the dequeue span comes right before the job's phase 2, inside the call's correlation id
    host = h.sim.recorder.records("host")
    rows = [(p, c) for t, p, c in zip(host["thread"], host["phase"], host["corr"]) if t == "task_queue"]
    first = rows.index(next(r for r in rows if r[0] == "dequeue"))
    assert rows[first + 1][0] == "L2 phase2 entry" and rows[first][1] == rows[first + 1][1]


def test_without_a_queue_nothing_is_charged():
    h = Harness(env={"TASK_QUEUE_ENABLE": "0"})
    h.run(_three_adds(h))
    assert not _spans(h, "enqueue") and not _spans(h, "dequeue") and not _spans(h, "dequeue gap")


def test_the_consumer_pays_dequeue_and_gap_per_job_so_a_backlog_drains_later():
    cheap = Harness(env={"TASK_QUEUE_ENABLE": "1"}, sim_kw={"cost_overrides": {"dequeue": 0, "dequeue gap": 0}})
    cheap.run(_three_adds(cheap))
    dear = Harness(env={"TASK_QUEUE_ENABLE": "1"}, sim_kw={"cost_overrides": {"dequeue": 50, "dequeue gap": 30}})
    dear.run(_three_adds(dear))
    assert dear.sim.env.now >= cheap.sim.env.now + 3 * 50 + 2 * 30


def test_scenario_event_records_are_enqueued_too():
    data = {"name": "ev", "events": ["e"], "threads": [
        {"name": "py", "cache_mode": "pta", "streams": ["s0"], "program": [
            {"op": "Add", "shape": [8]}, {"record_event": {"event": "e", "stream": "s0"}}]}]}
    res = run_scenario(data, write=False)
    host = res.sim.recorder.records("host")
    enq = [op for t, p, op in zip(host["thread"], host["phase"], host["op"]) if p == "enqueue"]
    deq = [op for t, p, op in zip(host["thread"], host["phase"], host["op"]) if p == "dequeue"]
    assert enq == ["aclnnAdd", "aclrtRecordEvent"] and deq == enq


def test_defaults_are_the_medians_of_the_public_trace_they_name():
    measured = queue_phases(read_trace_view(REAL))
    assert set(measured) == set(QUEUE_PHASES)
    for phase, m in measured.items():
        value, provenance = HOST_PHASES[phase]
        assert value == pytest.approx(m.median_us), phase
        assert "trace_view_910b_mnist.json" in provenance and f"{m.n} " in provenance
    assert measured["enqueue"].n == 148 and measured["dequeue"].n == 148
