"""The profiler writers' linear-time forms agree with their plain references: trace_view.json's directly
formatted lines with ``json.dumps`` of every event, and the bisecting step finder with a scan of the windows."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_build import StepFinder, _scan_step, build_profile
from opsim.trace.ascend_model import StepWindow
from opsim.trace.ascend_trace_view import trace_events, trace_view_json

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_trace_view_lines_are_json_dumps_of_the_events():
    res = run_scenario(SCENARIOS / "quickstart.yaml", write=False)
    p = build_profile(res.sim)
    tasks = p.tasks
    for i in range(3):  # names that need escaping are written as json.dumps writes them
        tasks.name[i] = tasks.code('na"me\\ é\n' + tasks.texts[tasks.name[i]])
    p.op_calls.apis[p.op_calls.api[0]] = 'aclnnOdd"Näme'  # every call of that API
    want = "[\n" + ",\n".join(json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                              for e in trace_events(p)) + "\n]\n"
    assert trace_view_json(p) == want


windows = st.lists(st.tuples(st.integers(0, 50), st.integers(0, 8), st.integers(1, 5)), max_size=8).map(
    lambda spec: [StepWindow(n, "t", 1, s, s + d) for n, (s, d, _) in enumerate(sorted(spec), 1)])


@settings(max_examples=200, deadline=None)
@given(windows, st.integers(-2, 70), st.booleans())
def test_step_finder_agrees_with_a_scan(ws, t, apart):
    if apart:  # a thread's steps: sorted, each ending by the next one's start
        ws = [StepWindow(w.step, w.thread, w.tid, w.start_ns, min(w.end_ns, nxt.start_ns))
              for w, nxt in zip(ws, ws[1:])] + ws[-1:]
    assert StepFinder(ws)(t) == _scan_step(t, ws)


def test_summary_and_table_give_simulate_and_write_time_apart(tmp_path):
    from opsim.trace.summary import render_table
    res = run_scenario(SCENARIOS / "quickstart.yaml", out_dir=tmp_path, profiler_output="both")
    on_disk = json.loads((tmp_path / "summary.json").read_text())["wall"]
    assert on_disk["write_seconds"] > 0 and on_disk["wall_seconds"] > 0
    assert res.summary["wall"] == on_disk
    assert "s simulating, " in render_table(res.summary) and " s writing the outputs" in render_table(res.summary)


def test_the_writing_bar_names_each_writer(monkeypatch):
    import io
    import sys

    from opsim.scenario import runner
    from opsim.scenario.loader import load_scenario
    err = io.StringIO()
    err.isatty = lambda: True
    monkeypatch.setattr(sys, "stderr", err)
    stage = runner._writing_bar(load_scenario(SCENARIOS / "quickstart.yaml"), "both", True)
    seen = []
    import tqdm
    monkeypatch.setattr(tqdm.tqdm, "set_description", lambda self, d: seen.append(d))
    for name in ("trace.json", "profiler output", None):
        stage(name)
    assert seen == ["writing trace.json", "writing profiler output"]
