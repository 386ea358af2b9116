"""The Result API: lazily built DataFrames, trace-derived figures, save / load_result round trip."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import opsim
from opsim.api import RECORDS_FILE, Result, load_result
from opsim.errors import InvalidArgumentError
from opsim.trace.recorder import COLUMNS

CALLS_PER_THREAD = 24 + 2 * 3  # 24 Adds plus an Addmm and a Softmax every eighth call


def test_tables_have_recorder_columns_plus_derived_ones(small_result):
    r = small_result
    assert list(r.host_spans.columns) == [*COLUMNS["host"], "end"]
    assert list(r.device_tasks.columns) == [*COLUMNS["device"], "dur", "wait"]
    assert {"workspace", "op", "workspace_in_use"} <= set(r.memory.columns)
    assert {"corr", "lookup"} <= set(r.cache_events.columns)
    assert len(r.host_spans) == r.count("host") and len(r.device_tasks) == r.count("device")


def test_op_calls_one_row_per_aclnn_call(small_result):
    calls = small_result.op_calls
    assert len(calls) == 2 * CALLS_PER_THREAD
    assert calls["corr"].is_unique
    summary = small_result.op_summary.set_index("api")
    assert summary.loc["aclnnAdd", "calls"] == 48
    assert summary.loc["aclnnAddmm", "calls"] == 6 and summary.loc["aclnnSoftmax", "calls"] == 6
    assert summary.loc["aclnnAddmm", "device_tasks"] == 6 * 4  # MatMulV2, Muls, Muls, Add
    # every executor-cache lookup is attributed to exactly one call
    ev = small_result.cache_events
    assert (ev["corr"] >= 0).all()
    assert summary["exec_hits"].sum() + summary["exec_misses"].sum() == len(ev[ev["kind"].isin(["hit", "miss"])])
    # the call's busy host time is the sum of its charged phases
    host = small_result.host_spans
    phases = host[(host["phase"] != "op_call")]
    assert np.isclose(calls["host_busy_us"].sum(), phases.loc[phases["corr"] >= 0, "dur"].sum())


def test_workspace_allocations_are_recognised(small_result):
    mem = small_result.memory
    # the workload allocates device memory only for workspaces (run_op's malloc between the two phases)
    assert len(mem) > 0 and mem["workspace"].all()
    assert (mem["workspace_in_use"] == mem["hbm_in_use"]).all()
    assert mem["time"].is_monotonic_increasing
    assert set(mem["op"]) == {"aclnnAddmm", "aclnnSoftmax"}
    f = small_result.figures
    assert f["peak_workspace_in_use_bytes"] == mem["hbm_in_use"].max() == f["peak_hbm_bytes"]
    assert f["largest_workspace_bytes"] == mem.loc[mem["kind"] == "alloc", "size"].max()
    # both threads' Addmm workspaces are live together
    assert f["peak_workspace_in_use_bytes"] >= 2 * mem.loc[mem["op"] == "aclnnAddmm", "size"].max()


def test_figures_agree_with_tables(small_result):
    f = small_result.figures
    ev = small_result.cache_events
    assert f["op_calls"] == 2 * CALLS_PER_THREAD
    assert f["exec_hits"] == (ev["kind"] == "hit").sum()
    assert f["exec_hit_rate"] == pytest.approx(f["exec_hits"] / (f["exec_hits"] + f["exec_misses"]))
    assert f["makespan_us"] == pytest.approx(small_result.sim.now)
    assert f["device_busy_us"] == pytest.approx(small_result.device_tasks.query("unit_kind != 'none'")["dur"].sum())
    assert np.isnan(f["aicpu_hit_rate"]) and f["aicpu_tasks"] == 0
    assert small_result.summary == f  # no scenario summary: the figures stand in


def test_save_and_load_round_trip(small_result, tmp_path):
    path = small_result.save(tmp_path)
    assert path.name == RECORDS_FILE
    loaded = load_result(tmp_path)
    for name in ("host_spans", "device_tasks", "memory", "cache_events", "op_calls", "op_summary", "aicpu_tasks"):
        pd.testing.assert_frame_equal(getattr(loaded, name), getattr(small_result, name), check_dtype=False)
    assert loaded.figures == pytest.approx(small_result.figures, nan_ok=True)
    assert loaded.pools == small_result.pools
    assert loaded.outputs["records"] == path


def test_save_is_byte_deterministic(small_result, tmp_path):
    a = small_result.save(tmp_path / "a").read_bytes()
    b = small_result.save(tmp_path / "b").read_bytes()
    assert a == b


def test_load_result_errors_name_the_problem(tmp_path):
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        load_result(tmp_path / "missing")
    with pytest.raises(InvalidArgumentError, match=RECORDS_FILE):
        load_result(tmp_path)
    (tmp_path / RECORDS_FILE).write_bytes(b"not gzip")
    with pytest.raises(InvalidArgumentError, match="not a readable"):
        load_result(tmp_path)


def _synthetic(records: dict[str, dict[str, list]]) -> Result:
    cols = {k: {c: [] for c in cols} for k, cols in COLUMNS.items()}
    for kind, values in records.items():
        cols[kind].update(values)
    return Result(cols, meta={"pools": {"aicpu": 2}})


def test_aicpu_tasks_pair_lookups_with_launches_in_order():
    r = _synthetic({
        "host": {"thread": ["t0", "t0"], "phase": ["FindTask", "op_call"], "op": ["IndexPut", "aclnnIndexPut"],
                 "start": [1.0, 0.0], "dur": [1.0, 50.0], "corr": [7, 7]},
        "device": {"device": [0, 0, 0], "stream": [0, 0, 0], "unit_kind": ["aicpu", "aicpu", "aicore"],
                   "units": [1, 1, 2], "task_id": [0, 1, 2], "op": ["IndexPut", "IndexPut", "Add"],
                   "task_type": ["AI_CPU", "AI_CPU", "AI_CORE"], "block_dim": [1, 1, 2],
                   "queued": [10.0, 20.0, 30.0], "start": [10.0, 20.0, 30.0], "end": [15.0, 25.0, 31.0],
                   "corr": [7, 7, 7]},
        "cache": {"time": [2.0, 12.0, 60.0], "thread": ["t0", "t0", "t0"], "cache": ["aicpu"] * 3,
                  "kind": ["miss", "oneshot", "hit"], "op": ["IndexPut"] * 3, "key_hash": [1, 2, 1],
                  "detail": ["", "", ""]},
    })
    tasks = r.aicpu_tasks
    assert list(tasks["cache"]) == ["miss", "oneshot"]
    assert list(tasks["api"]) == ["aclnnIndexPut"] * 2 and list(tasks["thread"]) == ["t0"] * 2
    # the lookup at t=60 lies outside every call of t0
    assert list(r.cache_events["corr"]) == [7, 7, -1]
    f = r.figures
    assert (f["aicpu_hits"], f["aicpu_misses"], f["aicpu_oneshots"]) == (1, 1, 1)
    assert f["aicpu_hit_rate"] == pytest.approx(1 / 3)


def test_result_rejects_missing_kinds():
    with pytest.raises(InvalidArgumentError, match="record kinds"):
        Result({"host": {}})


def test_top_level_exports_are_lazy():
    code = ("import sys, opsim; assert 'numba' not in sys.modules and 'pandas' not in sys.modules, "
            "sorted(m for m in sys.modules if m in ('numba', 'pandas')); "
            "assert callable(opsim.run) and callable(opsim.load_result); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert opsim.load_result is load_result and opsim.Result is Result
    from opsim.analysis.what_if import what_if
    assert opsim.what_if is what_if
    with pytest.raises(AttributeError):
        opsim.no_such_name  # noqa: B018


def test_cached_task_counter_name_matches_the_task_spaces():
    from opsim.trace.frames import AICPU_CACHED_COUNTER
    from opsim.opdev.aicpu.task_space import CACHED_TASKS_COUNTER
    assert AICPU_CACHED_COUNTER == CACHED_TASKS_COUNTER
    r = _synthetic({"counter": {"time": [1.0, 2.0, 3.0], "name": [AICPU_CACHED_COUNTER] * 3, "value": [1, 3, 0]}})
    assert r.figures["aicpu_cached_tasks_peak"] == 3


def test_aicpu_tables_on_a_real_run(aicpu_result):
    r = aicpu_result
    tasks = r.aicpu_tasks
    f = r.figures
    assert len(tasks) == f["aicpu_tasks"] == 48
    counts = tasks["cache"].value_counts().to_dict()
    assert counts == {"hit": f["aicpu_hits"], "miss": f["aicpu_misses"], "oneshot": f["aicpu_oneshots"]}
    assert f["aicpu_misses"] == 4 and f["aicpu_cached_tasks_peak"] == 4  # the limit is per task space
    assert set(tasks["api"]) == {"aclnnRoll"} and set(tasks["thread"]) == {"t0", "t1"}
    row = r.op_summary.set_index("api").loc["aclnnRoll"]
    assert row["aicpu_hit_rate"] == pytest.approx(f["aicpu_hit_rate"])
