"""Batched steady state (opsim.scenario.batch): a run whose loops go through the compiled event loop writes the
bytes of the same run without batches and of the reference path, and the batches really run."""
from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scenario_helpers import SCENARIOS
from opsim.scenario import batch
from opsim.scenario.runner import run_scenario


def _files(root):
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            if p.name == "summary.json":
                summary = json.loads(data)
                summary.pop("wall")
                data = summary
            out[p.relative_to(root).as_posix()] = data
    return out


class _Spy:
    """Counts the calls made by batches (and the batches)."""

    def __init__(self, monkeypatch):
        self.calls = 0
        self.batches = 0
        self.attempts = 0
        run = batch.run_batch

        def spy(wl):
            self.attempts += 1
            made, ev = run(wl)
            self.calls += made
            self.batches += bool(made)
            return made, ev

        monkeypatch.setattr(batch, "run_batch", spy)


def _run_three_ways(monkeypatch, tmp_path, source, overrides=None, write=True, eager=False):
    """(batched, without batches, reference path) outputs, and the spy of the batched run (`eager`: a thread
    tries a batch before every call, however short the last one was)."""
    outs = {}
    with monkeypatch.context() as m:
        spy = _Spy(m)
        m.setattr(batch, "MIN_CALLS", 0)
        if eager:
            m.setattr(batch, "BACKOFF", 0)
        res = run_scenario(source, out_dir=tmp_path / "batched", overrides=overrides, write=write)
        outs["batched"] = _files(tmp_path / "batched") if write else _summary(res)
    with monkeypatch.context() as m:
        m.setattr(batch, "loop_batchable", lambda *a: False)
        res = run_scenario(source, out_dir=tmp_path / "plain", overrides=overrides, write=write)
        outs["plain"] = _files(tmp_path / "plain") if write else _summary(res)
    res = run_scenario(source, out_dir=tmp_path / "reference", overrides=overrides, write=write, fast_path=False)
    outs["reference"] = _files(tmp_path / "reference") if write else _summary(res)
    return outs, spy


def _summary(res):
    summary = dict(res.summary)
    summary.pop("wall")
    return summary


@pytest.mark.parametrize("count, outputs, files, batched", [
    (500, {}, {"records.json.gz", "scenario.yaml"}, 3000),
    (500, {"trace": True, "outputs.trace": True}, {"trace.json", "records.json.gz"}, 3000),
    (300, {"trace": True, "outputs.trace": True, "outputs.csv": True}, {"trace.json", "op_summary.csv",
                                                                        "task_time.csv"}, 1500),
], ids=["trace-off", "full-trace", "csvs"])
def test_large_yaml_cut_runs_in_batches_and_writes_the_same_bytes(monkeypatch, tmp_path, count, outputs, files,
                                                                  batched):
    """large.yaml cut to 8 x `count` calls, as bundled (trace off: the summary's totals), with the full trace
    (rows of every record kind from the batches) and with the CSVs (whose rows name each call's op step and
    variant: the runner's call tagging, which a batch records for the calls it makes): most calls are made by
    batches, and every output file (summary.json but its wall-clock section) is byte for byte the same."""
    cut = {"threads.0.program.0.loop.count": count, "threads.1.program.0.loop.count": count, **outputs}
    outs, spy = _run_three_ways(monkeypatch, tmp_path, SCENARIOS / "large.yaml", cut)
    assert files <= set(outs["batched"])
    assert outs["batched"] == outs["plain"] == outs["reference"]
    assert outs["batched"]["summary.json"]["op_calls"] == 8 * count
    assert spy.calls > batched, spy.calls


def test_short_runs_are_not_batched(monkeypatch):
    """A run of fewer than MIN_CALLS planned calls never loads the compiled loop (large.yaml's million are)."""
    cut = {"threads.0.program.0.loop.count": 50, "threads.1.program.0.loop.count": 50}
    with monkeypatch.context() as m:
        spy = _Spy(m)
        run_scenario(SCENARIOS / "large.yaml", overrides=cut, write=False)
    assert spy.batches == 0 and spy.attempts == 0
    with monkeypatch.context() as m:
        spy = _Spy(m)
        m.setattr(batch, "MIN_CALLS", 400)
        m.setattr(batch, "BACKOFF", 0)
        run_scenario(SCENARIOS / "large.yaml", overrides=cut, write=False)
    assert spy.batches > 0


def test_no_batches_on_the_reference_path(monkeypatch):
    cut = {"threads.0.program.0.loop.count": 50, "threads.1.program.0.loop.count": 50}
    with monkeypatch.context() as m:
        spy = _Spy(m)
        m.setattr(batch, "MIN_CALLS", 0)
        run_scenario(SCENARIOS / "large.yaml", overrides=cut, write=False, fast_path=False)
    assert spy.attempts == 0


_OPS = [
    {"op": "Add", "shape_choices": [[64], [256, 256], [1024]], "dtype_choices": ["float", "float16"]},
    {"op": "Softmax", "shape": [64, 512], "dtype": "float16"},
    {"op": "ReduceSum", "shape_choices": [[1024, 64], [64, 1024]], "dtype": "float", "attrs": {"dim": [1]}},
    {"op": "Relu", "shape_choices": [[4096], [128, 128]], "dtype": "float"},
    {"op": "Mul", "shape": [512], "dtype_choices": ["float", "float16"]},
    {"op": "Cast", "shape": [1024, 64], "dtype": "float", "attrs": {"dtype": "float16"}},
]


@st.composite
def _scenarios(draw):
    n_threads = draw(st.integers(1, 3))
    shared = draw(st.booleans())
    threads = []
    for i in range(n_threads):
        body = [dict(op) for op in draw(st.lists(st.sampled_from(_OPS), min_size=1, max_size=4))]
        if shared:
            for op in body:
                if draw(st.booleans()):
                    op["stream"] = "shared"
        program = [{"loop": {"count": draw(st.integers(1, 30)), "body": body}}]
        extra = draw(st.sampled_from(["none", "sleep_first", "sync_after", "plain_loop", "op_after", "two_loops"]))
        if extra == "sleep_first":
            program.insert(0, {"sleep": draw(st.sampled_from([0.5, 3.0, 40.0]))})
        elif extra == "sync_after":
            program.append({"sync": f"s{i}"})
        elif extra == "plain_loop":  # a loop with a sleep is not batched: its thread's events are barriers
            program.append({"loop": {"count": draw(st.integers(1, 10)),
                                     "body": [dict(_OPS[0]), {"sleep": draw(st.sampled_from([0.25, 2.0]))}]}})
        elif extra == "op_after":
            program.append(dict(draw(st.sampled_from(_OPS))))
        elif extra == "two_loops":
            program.append({"loop": {"count": draw(st.integers(1, 20)), "body": [dict(draw(st.sampled_from(_OPS)))]}})
        threads.append({"name": f"t{i}", "streams": [f"s{i}"], "program": program})
    trace = draw(st.booleans())
    scenario = {"name": "batched", "seed": draw(st.integers(0, 1000)), "trace": trace,
                "outputs": {"trace": trace, "csv": trace and draw(st.booleans())}, "threads": threads,
                "on_error": draw(st.sampled_from(["stop", "continue"]))}
    if shared:
        scenario["streams"] = ["shared"]
    soc = {}
    vector = draw(st.sampled_from([None, 0, 2, 16]))  # few vector cores: streams wait for units
    if vector is not None:
        soc["vector_core_count"] = vector
    if draw(st.booleans()):
        soc["aicore_count"] = draw(st.sampled_from([1, 4]))
    if draw(st.booleans()):  # little HBM: workspaces stop fitting, tensors fail to allocate
        soc["hbm_bytes"] = draw(st.sampled_from([2 << 20, 4 << 20, 8 << 20]))
    if soc:
        scenario["soc_overrides"] = soc
    if draw(st.booleans()):
        scenario["memory_strategy"] = "best_fit"
    env = draw(st.sampled_from([{}, {"ACLNN_CACHE_LIMIT": "2"}, {"ACLNN_CACHE_LIMIT": "0"}]))
    if env:
        scenario["env"] = env
    return scenario


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_scenarios())
def test_random_scenarios_give_the_same_outputs_with_and_without_batches(monkeypatch, tmp_path, scenario):
    """One to three threads, own and shared streams, few vector cores (units waited for), little HBM (failed
    workspaces and tensors), both allocation strategies, executor-cache limits (misses, evictions), sleeps,
    syncs, loops that are not batched and ops after the loops, with the full trace (and the CSVs) or only the
    totals: the same output files all three ways."""
    import shutil
    shutil.rmtree(tmp_path, ignore_errors=True)
    outs, _spy = _run_three_ways(monkeypatch, tmp_path, scenario, write=True, eager=True)
    assert outs["batched"] == outs["plain"]
    assert outs["batched"] == outs["reference"]


LONG = {
    "name": "long", "seed": 7, "trace": False, "outputs": {"trace": False, "csv": False},
    "threads": [
        {"name": "many", "streams": ["s0"], "program": [{"loop": {"count": 4200, "body": [
            {"op": "Add", "shape_choices": [[64], [1024]], "dtype_choices": ["float", "float16"]},
            {"op": "Softmax", "shape": [64, 512], "dtype": "float16"}]}}]},
        {"name": "slow", "streams": ["s1"], "program": [{"loop": {"count": 1500, "body": [
            {"op": "Add", "shape": [8192, 4096], "dtype": "float"}]}}]},
    ],
}


def test_batches_stop_at_full_queues_and_reenter(monkeypatch, tmp_path):
    """A thread whose kernels outlast its host time and take every vector core, so that both streams' queues
    grow until a batch stops at a full queue (64 slots here) or is refused, and the compiled loop left and
    re-entered every 500 calls: the same outputs all three ways."""
    monkeypatch.setattr(batch, "CALLS_PER_ENTRY", 500)
    monkeypatch.setattr(batch, "QUEUE_SLOTS", 64)
    outs, spy = _run_three_ways(monkeypatch, tmp_path, LONG, write=True, eager=True)
    assert outs["batched"] == outs["plain"] == outs["reference"]
    assert outs["batched"]["summary.json"]["op_calls"] == 9900
    assert spy.calls > 50, spy.calls


def test_one_batch_draws_more_than_a_choosers_buffer(monkeypatch, tmp_path):
    """4 500 picks in one batch: the chooser's next 4096 draws are made in the middle of it, as a pick makes
    them."""
    scenario = {"name": "draws", "seed": 11, "trace": False, "outputs": {"trace": False, "csv": False},
                "threads": [{"name": "t", "streams": ["s0"], "program": [{"loop": {"count": 4500, "body": [
                    {"op": "Add", "shape_choices": [[64], [1024]], "dtype": "float"}]}}]}]}
    outs, spy = _run_three_ways(monkeypatch, tmp_path, scenario, write=True)
    assert outs["batched"] == outs["plain"] == outs["reference"]
    assert spy.calls > 4200, spy.calls


@pytest.mark.parametrize("rows", [64, 2])
def test_small_row_buffers_flush_often_or_stop_the_batch(monkeypatch, tmp_path, rows):
    """Row buffers of 64 rows are handed to the recorder every few calls; buffers of 2 rows cannot hold one
    call's rows, so every batch stops before its first call: the same bytes either way."""
    monkeypatch.setattr(batch, "ROWS", rows)
    cut = {"threads.0.program.0.loop.count": 100, "threads.1.program.0.loop.count": 100, "trace": True,
           "outputs.trace": True}
    outs, spy = _run_three_ways(monkeypatch, tmp_path, SCENARIOS / "large.yaml", cut, eager=True)
    assert outs["batched"] == outs["plain"] == outs["reference"]
    assert (spy.calls > 400) if rows == 64 else (spy.calls == 0 and spy.attempts > 0), spy.calls
