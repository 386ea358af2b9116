"""Steps: every thread's ProfilerSteps in the traces; one thread's steps (the first thread with steps, or
`outputs.step_thread`) in step_trace_time.csv, the kernels' Step Id and STEP_TIME."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsim.errors import InvalidArgumentError, ScenarioError
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_profiler import merge_intervals

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


@pytest.fixture(scope="module")
def quickstart():
    return run_scenario(QUICKSTART, write=False)


def _profile(res, step_thread=None):
    from opsim.trace.ascend_profiler import build_profile
    return build_profile(res.sim, step_thread=step_thread)


def test_each_thread_keeps_its_own_steps_in_the_trace(quickstart):
    p = _profile(quickstart)
    assert {w.thread for w in p.steps} == {"trainer", "sampler"}
    assert {w.thread for w in p.step_windows} == {"trainer"}  # the first thread with steps


@pytest.mark.parametrize("thread", [None, "sampler"])
def test_step_rows_follow_one_thread_and_count_each_task_once(quickstart, thread):
    p = _profile(quickstart, thread)
    want = thread or "trainer"
    assert [w.thread for w in p.step_windows] == [want] * len(p.step_windows)
    assert [r.step for r in p.step_rows] == [w.step for w in p.step_windows]
    for w, r in zip(p.step_windows, p.step_rows):
        mine = [t for t in p.tasks if t.is_busy and t.step == w.step]
        # every task belongs to the step in which its launching call started
        assert all(w.start_ns <= (t.op_call.start_ns if t.op_call else t.start_ns) < w.end_ns for t in mine)
        union = merge_intervals((t.start_ns, t.end_ns) for t in mine if t.end_ns > t.start_ns)
        assert r.computing == sum(e - s for s, e in union) <= r.stage
        assert r.free == r.stage - r.computing


def test_a_later_step_is_as_long_as_its_own_work(quickstart):
    # the main thread's steps 2.. hold only the work their calls launched (no other thread's later steps)
    p = _profile(quickstart)
    for r in p.step_rows[1:]:
        assert r.stage < 1_000_000  # under 1 ms (the whole run is 2.3 ms)


def test_step_thread_scenario_option(tmp_path):
    res = run_scenario(QUICKSTART, out_dir=tmp_path, overrides={"outputs.step_thread": "sampler"},
                       profiler_output="both")
    pdir = next(tmp_path.glob("quickstart_*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT"
    rows = (pdir / "step_trace_time.csv").read_text().splitlines()
    assert len(rows) - 1 == len(_profile(res, "sampler").step_rows)
    view = json.loads((pdir / "trace_view.json").read_text())
    step_tids = {e["tid"] for e in view if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
    assert len(step_tids) == 2  # both threads' steps are still shown
    with pytest.raises(ScenarioError, match="step_thread.*no thread is named 'smapler'.*sampler"):
        load_scenario(QUICKSTART, {"outputs.step_thread": "smapler"})
    with pytest.raises(InvalidArgumentError, match="not a thread"):
        _profile(res, "nobody")


def test_summary_run_table_and_result_give_the_step_breakdown(tmp_path):
    """summary.json's step_breakdown is step_trace_time.csv summed over the steps; the run table prints it and
    Result.step_breakdown returns it; a run without records (trace: false) has none."""
    import csv

    from opsim.scenario.loader import parse_override
    from opsim.scenario.result import Result
    from opsim.trace.summary import render_table
    res = run_scenario(QUICKSTART, out_dir=tmp_path / "q", profiler_output=True)
    sb = res.summary["step_breakdown"]
    (path,) = (tmp_path / "q").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
    rows = list(csv.DictReader(path.open()))
    assert sb["steps"] == len(rows) == 4 and sb["step_thread"] == "trainer"
    for key, col in (("computing_us", "Computing"), ("comm_not_overlapped_us", "Communication(Not Overlapped)"),
                     ("overlapped_us", "Overlapped"), ("communication_us", "Communication"), ("free_us", "Free"),
                     ("stage_us", "Stage"), ("bubble_us", "Bubble"), ("preparing_us", "Preparing")):
        assert sb[key] == pytest.approx(sum(float(r[col]) for r in rows), abs=0.01), key
    assert sb["stage_us"] == pytest.approx(sb["computing_us"] + sb["comm_not_overlapped_us"] + sb["free_us"])
    assert "step breakdown" in render_table(res.summary) and "4 step(s)" in render_table(res.summary)
    assert json.loads((tmp_path / "q" / "summary.json").read_text())["step_breakdown"] == sb
    assert Result.from_run(res).step_breakdown == sb
    off = run_scenario(QUICKSTART, write=False, overrides=dict([parse_override("trace=false")]))
    assert off.summary["step_breakdown"] is None and "step breakdown" not in render_table(off.summary)


def test_summary_step_breakdown_follows_step_thread():
    from opsim.scenario.loader import parse_override
    res = run_scenario(QUICKSTART, write=False, overrides=dict([parse_override("outputs.step_thread=sampler")]))
    assert res.summary["step_breakdown"]["step_thread"] == "sampler"
