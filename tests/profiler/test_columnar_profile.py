"""The profile model holds columns, not an object per task or span, and the db tables are streamed (issue 30:
a million-call run's profiler output in bounded memory); the object views read the same values."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_build import build_profile
from opsim.trace.ascend_profiler_db import profiler_db_rows, profiler_db_tables

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _profile():
    return build_profile(run_scenario(SCENARIOS / "quickstart.yaml", write=False).sim)


def test_tasks_and_spans_are_columns_and_their_objects_read_them():
    p = _profile()
    tasks, spans = p.tasks, p.api_spans
    assert len(tasks) > 10 and len(spans) > 10
    for col in (tasks.start_ns, tasks.end_ns, tasks.stream, tasks.step, spans.start_ns, spans.tid, spans.corr):
        assert isinstance(col, np.ndarray)
    objs = list(tasks)
    assert [t.start_ns for t in objs] == tasks.start_ns.tolist()
    assert [t.step for t in objs] == tasks.steps_or_none()
    assert [t.is_kernel for t in objs] == tasks.is_kernel().tolist()
    assert all((t.op_call is None) == (c < 0) for t, c in zip(objs, tasks.call.tolist()))
    assert [(a.kind, a.name, a.start_ns, a.end_ns) for a in spans] == [
        (spans[i].kind, spans[i].name, int(spans.start_ns[i]), int(spans.end_ns[i])) for i in range(len(spans))]
    keys = [(t.start_ns, t.stream, t.task_id) for t in objs]
    assert keys == sorted(keys)


def test_large_db_tables_are_streamed_and_every_text_is_numbered_first():
    p = _profile()
    tables = profiler_db_tables(p, 0)
    assert list(tables)[0] == "STRING_IDS"
    for name in ("TASK", "COMPUTE_TASK_INFO", "TASK_PMU_INFO", "CANN_API", "PYTORCH_API", "PYTORCH_CALLCHAINS",
                 "MEMORY_RECORD", "OP_MEMORY"):
        assert isinstance(tables[name], Iterator), name  # drawn while inserted, never a list of the table
    rows = profiler_db_rows(p, 0)
    ids = {i for i, _ in rows["STRING_IDS"]}
    assert sorted(ids) == list(range(len(ids)))
    used = {r[-2] for r in rows["CANN_API"]} | {r[4] for r in rows["PYTORCH_API"]} | {r[1] for r in
                                                                                       rows["PYTORCH_CALLCHAINS"]}
    used |= {r[6] for r in rows["TASK"]} | {r[0] for r in rows["COMPUTE_TASK_INFO"]} | {r[1] for r in
                                                                                         rows["TASK_PMU_INFO"]}
    assert used <= ids
