"""opsim.run / opsim.load_result on the bundled quickstart scenario."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import opsim
from opsim.api import RECORDS_FILE

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("quickstart")
    return opsim.run(QUICKSTART, out_dir=out), out


def test_run_exposes_runner_summary_and_outputs(quick):
    result, out = quick
    assert result.summary["scenario"] == "quickstart" == result.meta["scenario"]
    assert result.out_dir == out and result.outputs["records"] == out / RECORDS_FILE
    assert {"summary", "trace", "records"} <= set(result.outputs)
    assert all(p.is_file() for p in result.outputs.values())
    assert result.wall_seconds > 0 and result.sim is not None


def test_tables_agree_with_runner_summary(quick):
    result, _ = quick
    s = result.summary
    assert len(result.op_calls) == s["op_calls"] == result.figures["op_calls"]
    assert result.figures["exec_hits"] == s["exec_cache"]["hits"]
    assert result.figures["exec_misses"] == s["exec_cache"]["misses"]
    assert result.op_summary["calls"].sum() == s["op_calls"]
    assert result.figures["makespan_us"] == pytest.approx(s["simulated_makespan_us"])
    # every kernel belongs to exactly one call
    kernels = result.device_tasks.query("unit_kind != 'none'")
    assert set(kernels["corr"]) <= set(result.op_calls["corr"])


def test_load_result_reads_back_the_same_tables(quick):
    result, out = quick
    loaded = opsim.load_result(out)
    assert loaded.summary == result.summary
    assert loaded.stdout_text == result.stdout_text and loaded.stdout_text.startswith("test case opType")
    for name in ("host_spans", "device_tasks", "memory", "cache_events", "op_summary"):
        pd.testing.assert_frame_equal(getattr(loaded, name), getattr(result, name), check_dtype=False)
    assert set(loaded.outputs) == set(result.outputs)


def test_same_scenario_gives_identical_records_file(quick, tmp_path):
    _, out = quick
    opsim.run(QUICKSTART, out_dir=tmp_path)
    assert (tmp_path / RECORDS_FILE).read_bytes() == (out / RECORDS_FILE).read_bytes()


def test_keyword_overrides_and_in_memory_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    limited = opsim.run(QUICKSTART, write=False, env__ACLNN_CACHE_LIMIT="0")
    assert list(tmp_path.iterdir()) == []  # nothing written
    assert limited.outputs == {} and limited.figures["exec_hits"] == 0
    same = opsim.run(QUICKSTART, {"env.ACLNN_CACHE_LIMIT": "0"}, write=False)
    assert same.figures == limited.figures


def test_untraced_run_has_a_summary_and_says_why_it_has_no_tables():
    from opsim.analysis import what_if
    from opsim.errors import OpsimError
    result = opsim.run(QUICKSTART, {"trace": False}, write=False)
    assert not result.traced and result.summary["op_calls"] > 0
    with pytest.raises(OpsimError, match="trace: false"):
        result.op_calls  # noqa: B018
    df = what_if(QUICKSTART, "env.ACLNN_CACHE_LIMIT", [0, 100], overrides={"trace": False})
    assert "exec_hit_rate" not in df.columns
    assert list(df["summary.exec_cache.hits"]) == [0, opsim.run(QUICKSTART, write=False).figures["exec_hits"]]
