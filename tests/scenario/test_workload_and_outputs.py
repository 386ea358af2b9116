"""Seeded workload generation, determinism, summary-only runs, and the exporters' formats on small inputs."""
from __future__ import annotations

import io
import json

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scenario_helpers import SCENARIOS
from opsim.scenario.runner import run_scenario
from opsim.scenario.workload import Chooser, thread_rngs
from opsim.trace.chrome_trace import check_nesting
from opsim.trace.timefmt import nest_durations
from opsim.trace.ge_profiling import aicore_blocks, format_nnopbase_line, merge_text
from opsim.trace.msprof_csv import epoch_us_text, tensor_columns


def small(**extra):
    data = {
        "name": "w", "seed": 5,
        "threads": [{"name": "a", "streams": ["s"], "program": [
            {"loop": {"count": 3, "body": [
                {"op": "Mul", "shape_choices": [[8], [16], [32]], "dtype_choices": ["float", "float16"]},
                {"choose": [{"op": "Relu", "shape": [8]}, {"op": "Abs", "shape": [8]}]},
            ]}},
        ]}],
    }
    data.update(extra)
    return data


def calls_of(res):
    host = res.sim.recorder.records("host")
    return [op for p, op in zip(host["phase"], host["op"]) if p == "op_call"]


def test_same_seed_gives_byte_identical_outputs(tmp_path):
    a = run_scenario(SCENARIOS / "quickstart.yaml", out_dir=tmp_path / "a")
    b = run_scenario(SCENARIOS / "quickstart.yaml", out_dir=tmp_path / "b")
    assert set(a.outputs) == set(b.outputs)
    for key, path in a.outputs.items():
        other = b.outputs[key]
        if key == "summary":
            ja, jb = json.loads(path.read_text()), json.loads(other.read_text())
            ja.pop("wall"), jb.pop("wall")
            assert ja == jb
        else:
            assert path.read_bytes() == other.read_bytes(), key


def test_seed_drives_the_random_choices():
    def picks(res):
        dev = res.sim.recorder.records("device")
        return [(op, round(e - s, 6)) for op, s, e in zip(dev["op"], dev["start"], dev["end"]) if op != "free_async"]

    a = run_scenario(small(), write=False)
    b = run_scenario(small(), write=False)
    c = run_scenario(small(seed=6), write=False)
    assert len(calls_of(a)) == 6
    assert picks(a) == picks(b)
    assert picks(a) != picks(c)


def test_step_instants_mark_each_top_level_iteration():
    res = run_scenario(small(), write=False)
    inst = res.sim.recorder.records("instant")
    steps = [(a["step"], a["phase"]) for n, a in zip(inst["name"], inst["args"]) if n == "step"]
    assert steps == [(1, "begin"), (1, "end"), (2, "begin"), (2, "end"), (3, "begin"), (3, "end")]


def test_summary_only_run_gives_the_same_figures():
    full = run_scenario(SCENARIOS / "quickstart.yaml", write=False)
    lean = run_scenario(SCENARIOS / "quickstart.yaml", write=False,
                        overrides={"trace": False, "outputs.trace": False, "outputs.csv": False})
    assert lean.sim.recorder.count("host") == 0 and lean.sim.recorder.count("device") == 0
    a, b = dict(full.summary), dict(lean.summary)
    a.pop("wall"), b.pop("wall")
    # the step breakdown needs each task's interval and step: a run that keeps no records has none
    assert a.pop("step_breakdown")["steps"] == 4 and b.pop("step_breakdown") is None
    assert a == b


def test_numerics_do_not_change_the_workload():
    plain = run_scenario(small(), write=False)
    num = run_scenario(small(numerics=True), write=False)
    assert calls_of(plain) == calls_of(num)
    assert num.summary["leaks"]["count"] == 0


def test_on_error_continue_keeps_going():
    data = {"name": "oom", "soc_overrides": {"hbm_bytes": 1 << 20}, "on_error": "continue",
            "threads": [{"name": "a", "program": [
                {"op": "Relu", "shape": [1 << 20]}, {"op": "Relu", "shape": [16]}]}]}
    res = run_scenario(data, write=False)
    assert len(res.summary["errors"]) == 1 and res.summary["op_calls"] == 1
    assert "allocating the inputs/outputs failed: out of device memory" in res.summary["errors"][0]["message"]
    res = run_scenario(dict(data, on_error="stop"), write=False)
    assert res.summary["op_calls"] == 0 and res.summary["threads"]["a"]["stopped_on_error"]


@given(st.integers(0, 2**32), st.integers(1, 7))
@settings(max_examples=30, deadline=None)
def test_chooser_is_uniform_in_range_and_reproducible(seed, n):
    a, _ = thread_rngs(seed, 0)
    b, _ = thread_rngs(seed, 0)
    ca, cb = Chooser(a), Chooser(b)
    xs = [ca.pick(n) for _ in range(5000)]
    assert xs == [cb.pick(n) for _ in range(5000)]
    assert set(xs) <= set(range(n)) and (n == 1 or len(set(xs)) == n)


def test_chooser_picks_scale_the_generators_doubles_across_batches():
    rng, _ = thread_rngs(7, 0)
    ref, _ = thread_rngs(7, 0)
    draws = np.concatenate([ref.random(4096), ref.random(4096), ref.random(4096)])  # numpy doubles
    chooser = Chooser(rng)
    ns = [(3, 5, 7, 2, 6)[i % 5] for i in range(9000)]
    assert [chooser.pick(n) for n in ns] == [int(d * n) for d, n in zip(draws, ns)]


def test_thread_rngs_are_independent():
    a, da = thread_rngs(1, 0)
    b, _ = thread_rngs(1, 1)
    assert not np.array_equal(a.random(8), b.random(8))
    assert not np.array_equal(thread_rngs(1, 0)[0].random(8), da.random(8))


# ---- exporters on hand-made records ------------------------------------------------------------------

def test_nnopbase_block_from_host_spans():
    host = {"thread": [], "phase": [], "op": [], "start": [], "dur": [], "corr": []}

    def span(thread, phase, op, start, dur, corr):
        for k, v in zip(host, (thread, phase, op, start, dur, corr)):
            host[k].append(v)

    span("t", "L2 phase1 entry", "Add", 0.0, 0.3, 1)
    span("t", "make key", "Add", 0.3, 0.8, 1)
    span("t", "tiling", "Add", 1.1, 4.0, 1)
    span("t", "launch", "Add", 5.1, 3.0, 1)
    span("t", "op_call", "aclnnAdd", 0.0, 9.0, 1)
    span("t", "Launch", "Sigmoid", 9.0, 4.0, 2)  # an AI CPU-only call: no nnopbase block
    span("t", "op_call", "aclnnSigmoidAicpu", 9.0, 5.0, 2)
    blocks = aicore_blocks(host)
    assert len(blocks) == 1
    t, text = blocks[0]
    assert t == 9.0
    lines = text.splitlines()
    assert lines[0] == "test case opType: Add, index: 0"
    assert lines[2] == "Nnopbase time before match cache : 1.100000 us"
    assert lines[9] == "Nnopbase time tiling : 4.000000 us"
    assert lines[11] == "Nnopbase time launch : 3.000000 us"
    assert lines[5] == "Nnopbase time aging cache : 0.000000 us"
    assert format_nnopbase_line("x", 0.0004) == "Nnopbase time x : 0.000000 us\n"


def test_merge_is_in_simulated_time_order():
    printed = [(5.0, "a1\n"), (5.0, "a2\n"), (1.0, "b\n")]
    blocks = [(3.0, "c\n"), (5.0, "d\n")]
    assert merge_text(printed, blocks) == "b\nc\na1\na2\nd\n"


def test_epoch_times_are_exact():
    assert epoch_us_text(1_700_000_000_000_000, 12.2) == "1700000000000012.200"
    assert epoch_us_text(1_736_413_971_558_972, 0.0126) == "1736413971558972.013"
    cols = tensor_columns([((2, 3), "FLOAT", "ND"), ((3,), "FLOAT", "ND")], [((2, 3), "FLOAT16", "ND")])
    assert cols["Input Shapes"] == '"2,3;3"' and cols["Input Data Types"] == "FLOAT;FLOAT"
    assert cols["Output Shapes"] == '"2,3"' and cols["Output Formats"] == "ND"


def test_nesting_clamps_children_and_the_check_finds_overlaps():
    ends, durs = nest_durations([0, 2, 11], [10, 11, 12])
    assert ends.tolist() == [10, 10, 12] and durs[1] == 8 / 1000.0
    ev = [{"ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 0.010, "name": "p"},
          {"ph": "X", "pid": 1, "tid": 1, "ts": 0.005, "dur": 0.010, "name": "c"}]
    assert check_nesting(ev) and not check_nesting(ev[:1])


def test_progress_callback_counts_calls():
    seen = []
    from opsim.scenario.loader import load_scenario
    from opsim.scenario.runner import _Run
    cfg = load_scenario({"name": "p", "threads": [{"name": "a", "program": [
        {"loop": {"count": 2048, "body": [{"op": "Relu", "shape": [4]}]}}]}]}, {"trace": False})
    run = _Run(cfg, seen.append)
    run.sim.run()
    assert seen == [1024, 2048] and cfg.planned_calls() == 2048


def test_trace_json_loads_with_perfetto_friendly_fields(tmp_path):
    res = run_scenario(small(), out_dir=tmp_path)
    doc = json.loads((tmp_path / "trace.json").read_text())
    assert doc["displayTimeUnit"] == "ns"
    for e in doc["traceEvents"]:
        assert e["ph"] in "MXsfCi" and "pid" in e
        if e["ph"] == "X":
            assert e["dur"] >= 0 and e["ts"] >= 0
    buf = io.StringIO()
    from opsim.trace.chrome_trace import write_chrome_trace
    n = write_chrome_trace(res.sim, buf)
    assert n == len(doc["traceEvents"])


# ---- any valid call runs: random ops, shapes (empty ones included), dtypes, numerics on or off -------------

def _shapes_for(spec_name, inputs, base, a, b):
    if spec_name == "Matmul":
        return [[a, 4], [4, b]]
    if spec_name == "Addmm":
        return [[b], [a, 4], [4, b]]
    if spec_name in ("AddRmsNorm", "FusedBiasRelu"):
        return [base] * (len(inputs) - 1) + [base[-1:]]
    if spec_name == "IndexPut":
        return [base, [a]]
    return [base] * len(inputs)


@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_any_valid_call_runs_cleanly(data):
    from opsim.errors import ScenarioError
    from opsim.ops.registry import list_ops
    spec = data.draw(st.sampled_from(list_ops()), label="op")
    base = data.draw(st.lists(st.sampled_from([0, 1, 2, 3, 16]), min_size=1, max_size=3), label="base")
    a, b = data.draw(st.integers(0, 5)), data.draw(st.integers(0, 5))
    scenario = {"name": "p", "numerics": data.draw(st.booleans(), label="numerics"), "threads": [{
        "name": "t", "program": [{"loop": {"count": 2, "body": [{
            "op": spec.name, "shapes": _shapes_for(spec.name, spec.inputs, base, a, b),
            "dtype": data.draw(st.sampled_from(spec.dtypes), label="dtype")}]}}]}]}
    try:
        res = run_scenario(scenario, write=False)
    except ScenarioError:
        return  # shapes this op rejects: reported as a bad scenario, which is the point
    assert res.summary["errors"] == [] and res.summary["leaks"]["count"] == 0
    assert res.summary["op_calls"] == 2


def test_summary_only_run_warns_about_outputs_it_cannot_write():
    res = run_scenario(small(), overrides={"trace": False}, write=False)
    assert any("trace.json, the msprof CSVs cannot be written" in w for w in res.summary["warnings"])
    res = run_scenario(small(), overrides={"trace": False, "outputs": {"trace": False, "csv": False}}, write=False)
    assert res.summary["warnings"] == []


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io
    import sys

    from opsim.scenario import runner

    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    update, close = runner._progress_bar(100, True)
    assert update is None
    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    update, close = runner._progress_bar(100, True)
    update(50)
    update(100)
    close()
    assert runner._progress_bar(100, False)[0] is None


def test_nonzero_outputs_get_their_upper_bound_back_between_calls():
    """NonZero shrinks its output to the computed count; the next call on the same tensors must not fail."""
    from opsim.scenario.runner import run_scenario
    scenario = {"name": "nz", "seed": 1, "numerics": True,
                "threads": [{"name": "t", "streams": ["s"],
                             "program": [{"loop": {"count": 3, "body": [
                                 {"op": "NonZero", "shape": [16], "dtype": "int32"}]}}]}]}
    result = run_scenario(scenario, write=False)
    assert result.exit_code == 0, result.summary
