"""Every bundled scenario (except large.yaml) runs, and every output it writes parses and is well formed."""
from __future__ import annotations

import csv
import json

import pytest

from scenario_helpers import (BUNDLED, MSPROF_OP_SUMMARY, MSPROF_TASK_TIME, SCENARIOS, TESTED, check_timestamp_text,
                     flow_pairs)
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario
from opsim.trace.chrome_trace import check_nesting

_RUNS: dict = {}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each tested scenario run once for the module (name -> RunResult)."""
    if not _RUNS:
        base = tmp_path_factory.mktemp("bundled")
        for name in TESTED:
            _RUNS[name] = run_scenario(SCENARIOS / name, out_dir=base / name.removesuffix(".yaml"))
    return _RUNS


def test_the_bundled_set_is_complete():
    assert set(BUNDLED) >= {"quickstart.yaml", "aicpu_cache_pressure.yaml", "exec_cache_and_repeat.yaml",
                            "direct_invoke_fused.yaml", "multi_stream_contention.yaml", "memory_pressure.yaml",
                            "large.yaml"}


@pytest.mark.parametrize("name", BUNDLED)
def test_each_scenario_starts_with_the_question_it_answers(name):
    text = (SCENARIOS / name).read_text()
    first = text.splitlines()[0]
    assert first.startswith(f"# {name.removesuffix('.yaml')}:") and first.rstrip().endswith("?")


def test_large_has_a_million_calls_and_keeps_no_trace():
    cfg = load_scenario(SCENARIOS / "large.yaml")
    assert cfg.planned_calls() == 1_000_000
    assert cfg.trace is False


@pytest.mark.parametrize("name", TESTED)
def test_outputs_parse(runs, name):
    res = runs[name]
    out = res.out_dir
    summary = json.loads((out / "summary.json").read_text())
    assert summary["op_calls"] == res.summary["op_calls"] > 0
    assert summary["leaks"]["count"] == 0
    trace = json.loads((out / "trace.json").read_text())
    events = trace["traceEvents"]
    assert {"X", "M", "s", "f", "C"} <= {e["ph"] for e in events}
    with open(out / "op_summary.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == MSPROF_OP_SUMMARY
    assert len(rows) > 1 and all(len(r) == len(MSPROF_OP_SUMMARY) for r in rows)
    assert all(r[8].endswith("\t") for r in rows[1:])  # msprof's trailing TAB on the start time
    with open(out / "task_time.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == MSPROF_TASK_TIME and len(rows) > 1


@pytest.mark.parametrize("name", TESTED)
def test_trace_slices_nest_and_flows_have_both_ends(runs, name):
    events = json.loads((runs[name].out_dir / "trace.json").read_text())["traceEvents"]
    assert check_nesting(events) == []
    starts, ends = flow_pairs(events)
    assert starts and set(starts) == set(ends)
    host_pid = next(e["pid"] for e in events if e.get("name") == "process_name" and e["args"]["name"] == "Host")
    slices = [e for e in events if e.get("ph") == "X"]
    for fid, s in starts.items():
        f = ends[fid]
        assert s["pid"] == host_pid and f["pid"] != host_pid and f["bp"] == "e"
        # each end lies inside a slice of its own track (the launch span / the device task)
        for end in (s, f):
            assert any(x["pid"] == end["pid"] and x["tid"] == end["tid"] and
                       x["ts"] <= end["ts"] <= x["ts"] + x["dur"] for x in slices)
        assert f["ts"] >= s["ts"]


def test_trace_tracks(runs):
    events = json.loads((runs["quickstart.yaml"].out_dir / "trace.json").read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"Stream 0", "Stream 1", "Stream 2"} <= names
    assert any(n.startswith("trainer") for n in names) and any(n.startswith("sampler") for n in names)
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert "HBM in use" in counters and "aicore busy units" in counters
    assert any("cached" in c for c in counters)  # cached AI CPU tasks
    instants = {e["name"] for e in events if e["ph"] == "i"}
    assert {"exec cache hit", "exec cache miss", "aicpu cache miss", "aicpu cache hit"} <= instants
    steps = [e for e in events if e["ph"] == "X" and e["name"].startswith("ProfilerStep#")]
    assert len(steps) == 4 + 6


def test_oneshot_instants_in_cache_pressure(runs):
    res = runs["aicpu_cache_pressure.yaml"]
    events = json.loads((res.out_dir / "trace.json").read_text())["traceEvents"]
    oneshots = [e for e in events if e["ph"] == "i" and e["name"] == "aicpu cache oneshot"]
    assert len(oneshots) == res.summary["oneshot_tasks"] > 0


@pytest.mark.parametrize("name", ["quickstart.yaml", "aicpu_cache_pressure.yaml"])
def test_timestamp_text_matches_the_reference_format(runs, name):
    res = runs[name]
    text = (res.out_dir / "ge_profiling_stdout.txt").read_text()
    assert text == res.stdout_text
    counts = check_timestamp_text(text)
    aicpu_calls = res.summary["units"]["aicpu"]["tasks"]
    assert counts["aicpu"] == aicpu_calls > 0
    if name == "quickstart.yaml":
        assert counts["aicore"] > 0


def test_no_timestamp_text_without_the_variable(runs):
    res = runs["exec_cache_and_repeat.yaml"]
    assert res.stdout_text == "" and not (res.out_dir / "ge_profiling_stdout.txt").exists()


def test_msprof_rows_match_device_tasks(runs):
    res = runs["quickstart.yaml"]
    with open(res.out_dir / "op_summary.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    dev = res.sim.recorder.records("device")
    compute = sum(1 for k in dev["unit_kind"] if k in ("aicore", "vector", "aicpu"))
    assert len(rows) == compute
    starts = [float(r["Task Start Time(us)"]) for r in rows]
    assert starts == sorted(starts)
    assert rows[0]["Task Wait Time(us)"] == "0.000000"
    assert all(len(r["Task Wait Time(us)"].partition(".")[2]) == 6 for r in rows)  # one format per column
    mm = next(r for r in rows if r["OP Type"] == "MatMulV2")
    assert mm["Op Name"] == "aclnnMatmul_MatMulV2"
    assert mm["Input Shapes"] == '"128,256;256,512"' and mm["Input Data Types"] == "FLOAT16;FLOAT16"
    assert mm["Output Shapes"] == '"128,512"' and mm["Task Type"] == "AI_CORE"


def test_memory_pressure_reports_oom_cleanly(runs):
    res = runs["memory_pressure.yaml"]
    s = res.summary
    assert res.exit_code == 1
    assert len(s["errors"]) == 1
    err = s["errors"][0]
    assert err["status"] == 361001 and "out of device memory" in err["message"]
    assert s["memory"]["oom_events"] == 1
    assert s["leaks"]["count"] == 0
    assert s["threads"]["grower"]["stopped_on_error"] is True
    assert (res.out_dir / "trace.json").exists()


def test_repeatable_executor_runs_phase_one_once(runs):
    res = runs["exec_cache_and_repeat.yaml"]
    host = res.sim.recorder.records("host")
    mine = [(p, op) for t, p, op in zip(host["thread"], host["phase"], host["op"]) if t == "repeated"]
    assert sum(1 for p, _ in mine if p == "op_call") == 40
    assert sum(1 for p, _ in mine if p == "create executor") == 1
    assert sum(1 for p, _ in mine if p == "rt malloc") == 1
    assert not res.summary["warnings"]


def test_exec_cache_evicts_under_a_small_limit(runs):
    ec = runs["exec_cache_and_repeat.yaml"].summary["exec_cache"]
    assert ec["evictions"] > 0 and ec["hits"] > 0 and ec["misses"] > 8


def test_contention_saturates_the_ai_cores(runs):
    s = runs["multi_stream_contention.yaml"].summary
    assert s["units"]["aicore"]["utilization_pct"] > 80
    assert all(st["busy_pct"] < 60 for st in s["streams"].values())
