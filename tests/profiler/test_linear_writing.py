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
    for t in p.tasks[:3]:  # names that need escaping are written as json.dumps writes them
        t.name = 'na"me\\ é\n' + t.name
    p.op_calls[0].api = 'aclnnOdd"Näme'
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
