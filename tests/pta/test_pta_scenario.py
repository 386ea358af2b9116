"""`cache_mode: pta` in a scenario: the summary, the CLI table, trace.json, the profiler output and the
DataFrames count PTA hits and misses apart from the ordinary executor cache; the task-queue thread is a host
thread of its own; runs are deterministic."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsim import api
from opsim.scenario.runner import run_scenario
from opsim.trace.summary import render_table

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "pta_cache.yaml"


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    out = tmp_path_factory.mktemp("pta")
    return run_scenario(SCENARIO, out_dir=out, profiler_output=True)


def test_summary_counts_pta_apart_from_the_executor_cache(result):
    s = result.summary
    # python: Add (2 shapes) and Softmax miss once each, then hit; Roll (AI CPU) misses every time
    assert s["pta_cache"] == {"hits": 37, "misses": 23, "hit_rate": pytest.approx(37 / 60, abs=1e-3)}
    assert s["exec_cache"]["hits"] + s["exec_cache"]["misses"] == 40  # only the ordinary thread `app`
    assert s["threads"]["acl_thread"]["task_queue"] is True and s["threads"]["acl_thread"]["host_busy_us"] > 0
    table = render_table(s)
    assert "PTA hash cache" in table and "task-queue thread" in table
    assert json.loads((result.out_dir / "summary.json").read_text())["pta_cache"]["misses"] == 23


def test_trace_has_the_queue_thread_and_pta_instants(result):
    events = json.loads((result.out_dir / "trace.json").read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert {"python (tid 10001)", "app (tid 10002)", "acl_thread (tid 10003)"} <= names
    instants = [e["name"] for e in events if e.get("ph") == "i" and e.get("cat") == "cache"]
    assert instants.count("pta cache hit") == 37 and instants.count("pta cache miss") == 23


def test_profiler_output_hits_have_no_get_workspace_size(result):
    (view,) = result.out_dir.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(view.read_text())
    events = events if isinstance(events, list) else events["traceEvents"]
    tid_name = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                if e.get("ph") == "M" and e.get("name") == "thread_name"}
    count: dict[tuple[str, str], int] = {}
    for e in events:
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("AscendCL@aclnn"):
            key = (tid_name[(e["pid"], e["tid"])], e["name"])
            count[key] = count.get(key, 0) + 1
    assert count[("python", "AscendCL@aclnnAddGetWorkspaceSize")] == 2  # one miss per shape
    assert count[("python", "AscendCL@aclnnSoftmaxGetWorkspaceSize")] == 1
    assert count[("python", "AscendCL@aclnnRollGetWorkspaceSize")] == 20
    assert count[("acl_thread", "AscendCL@aclnnAdd")] == 20 and ("python", "AscendCL@aclnnAdd") not in count
    assert count[("app", "AscendCL@aclnnAddGetWorkspaceSize")] == count[("app", "AscendCL@aclnnAdd")] == 20


@pytest.fixture(scope="module")
def api_result():
    return api.run(SCENARIO, write=False)


def test_frames_count_pta_per_call_and_in_the_figures(api_result):
    res = api_result
    fig = res.figures
    assert (fig["pta_hits"], fig["pta_misses"]) == (37, 23)
    calls = res.op_calls
    assert int(calls["pta_hits"].sum()) == 37 and int(calls["pta_misses"].sum()) == 23
    assert int(calls.loc[calls["thread"] == "app", "pta_misses"].sum()) == 0


@pytest.mark.parametrize("tqe, p1_thread", [("0", "python"), ("2", "acl_thread")])
def test_task_queue_enable_moves_the_work(tqe, p1_thread):
    res = run_scenario(SCENARIO, overrides={"env.TASK_QUEUE_ENABLE": tqe}, write=False)
    host = res.sim.recorder.records("host")
    p1 = {t for t, p, op in zip(host["thread"], host["phase"], host["op"])
          if p == "L2 phase1 entry" and t != "app"}
    assert p1 == {p1_thread}
    assert ("acl_thread" in res.summary["threads"]) == (tqe != "0")
    assert res.summary["pta_cache"]["hits"] == 37


def test_same_seed_same_outputs(tmp_path):
    a = run_scenario(SCENARIO, out_dir=tmp_path / "a")
    b = run_scenario(SCENARIO, out_dir=tmp_path / "b")
    for name in ("trace.json", "op_summary.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert a.summary["pta_cache"] == b.summary["pta_cache"]


def test_an_ordinary_op_in_a_pta_thread_uses_opbase_key(tmp_path):
    data = {"name": "mix", "threads": [{"name": "py", "cache_mode": "pta", "program": [
        {"loop": {"count": 3, "body": [{"op": "Abs", "shape": [8]}, {"op": "Relu", "shape": [8],
                                                                       "cache_mode": "ordinary"}]}}]}]}
    s = run_scenario(data, write=False).summary
    assert (s["pta_cache"]["hits"], s["pta_cache"]["misses"]) == (2, 1)
    assert (s["exec_cache"]["hits"], s["exec_cache"]["misses"]) == (2, 1)
    assert s["leaks"]["count"] == 0


def test_a_failing_queued_call_stops_its_thread(tmp_path):
    data = {"name": "oom", "soc_overrides": {"hbm_bytes": 4096}, "threads": [
        {"name": "py", "cache_mode": "pta", "program": [{"loop": {"count": 4, "body": [
            {"op": "Add", "shape": [16, 16]}, {"op": "Add", "shape": [512]}]}}]}]}
    res = run_scenario(data, write=False)
    assert res.summary["errors"] and res.summary["threads"]["py"]["stopped_on_error"]
    assert res.summary["leaks"]["count"] == 0


def test_cache_hit_rate_plot_draws_the_pta_cache(api_result):
    import matplotlib
    matplotlib.use("Agg")
    from opsim.analysis import cache_hit_rate
    fig = cache_hit_rate(api_result)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(label.startswith("PTA hash cache (torch_npu): 61.7% over 60 lookups") for label in labels)


def test_event_records_of_a_queued_thread_go_through_the_queue():
    data = {"name": "ev", "events": ["e"], "threads": [
        {"name": "py", "cache_mode": "pta", "streams": ["s0", "s1"], "program": [
            {"op": "Add", "shape": [64, 64]}, {"record_event": {"event": "e", "stream": "s0"}},
            {"wait_event": {"event": "e", "stream": "s1"}}, {"op": "Relu", "shape": [64], "stream": "s1"}]}]}
    res = run_scenario(data, write=False)
    host = res.sim.recorder.records("host")
    where = {op: t for t, p, op in zip(host["thread"], host["phase"], host["op"]) if p == "launch"
             and op in ("RecordEvent", "StreamWaitEvent")}
    assert where == {"RecordEvent": "task_queue", "StreamWaitEvent": "task_queue"}
    dev = res.sim.recorder.records("device")
    ends = {op: e for op, e in zip(dev["op"], dev["end"])}
    starts = {op: s for op, s in zip(dev["op"], dev["start"])}
    assert starts["Relu"] >= ends["Add"]  # the wait on s1 is behind Add on s0
