"""what_if: one tidy row per value; the cache hit rate never falls as the cache limit grows."""
from __future__ import annotations

from pathlib import Path

import pytest

from opsim.analysis import what_if
from opsim.errors import InvalidArgumentError

from .conftest import run_with

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "aicpu_cache_pressure.yaml"


def _non_decreasing(values) -> bool:
    values = list(values)
    return all(a <= b + 1e-12 for a, b in zip(values, values[1:]))


def test_exec_cache_hit_rate_monotone_in_limit():
    seen = []
    df = what_if(run_with, "env.ACLNN_CACHE_LIMIT", [1, 4, 8, 16], on_result=lambda v, r: seen.append(v))
    assert list(df["env.ACLNN_CACHE_LIMIT"]) == [1, 4, 8, 16] == seen
    assert {"makespan_us", "exec_hit_rate", "aicpu_hit_rate", "peak_workspace_in_use_bytes", "largest_workspace_bytes"} <= set(df.columns)
    assert _non_decreasing(df["exec_hit_rate"])
    assert df["exec_hit_rate"].iloc[0] < df["exec_hit_rate"].iloc[-1]  # the limit matters in this workload
    assert _non_decreasing(-df["host_busy_us"])  # fewer misses: less phase-1 work on the host


def test_aicpu_hit_rate_monotone_on_bundled_scenario():
    df = what_if(SCENARIO, "env.ACLNN_AICPU_CACHE_LIMIT", [0, 4, 16, 64])
    assert list(df["env.ACLNN_AICPU_CACHE_LIMIT"]) == [0, 4, 16, 64]
    assert _non_decreasing(df["aicpu_hit_rate"])
    assert _non_decreasing(-df["aicpu_oneshots"])
    assert df["aicpu_hit_rate"].iloc[0] == 0.0 < df["aicpu_hit_rate"].iloc[-1]  # a limit of 0 never caches
    # the scenario runner's own summary comes along, flattened
    assert (df["summary.aicpu_cache.hits"] == df["aicpu_hits"]).all()
    assert (df["summary.oneshot_tasks"] == df["aicpu_oneshots"]).all()


def test_fixed_overrides_apply_to_every_run():
    # under the aicpu-guide profile ACLNN_CACHE_LIMIT governs the AI CPU cache and ACLNN_AICPU_CACHE_LIMIT is ignored
    guide = what_if(SCENARIO, "env.ACLNN_AICPU_CACHE_LIMIT", [0, 64], overrides={"profile": "aicpu-guide"})
    assert guide["aicpu_hit_rate"].nunique() == 1 and guide["aicpu_oneshots"].eq(0).all()
    assert set(guide["summary.profile"]) == {"aicpu-guide"}
    limited = what_if(SCENARIO, "env.ACLNN_CACHE_LIMIT", [0, 2], overrides={"profile": "aicpu-guide"})
    assert limited["aicpu_oneshots"].iloc[0] > limited["aicpu_oneshots"].iloc[1]


def test_what_if_rejects_bad_arguments():
    with pytest.raises(InvalidArgumentError, match="values is empty"):
        what_if(run_with, "env.ACLNN_CACHE_LIMIT", [])
    with pytest.raises(InvalidArgumentError, match="dotted override key"):
        what_if(run_with, "", [1])
    bad = what_if(lambda overrides: 3, "env.X", [1, 2])  # a point that cannot run is a row that says why
    assert list(bad["status"]) == ["failed", "failed"]
    assert bad["error"].str.contains("returned int").all()


def test_bad_value_is_reported_before_anything_runs():
    from opsim.errors import ScenarioError
    seen = []
    with pytest.raises(ScenarioError, match="soc='Ascend999'"):
        what_if(SCENARIO, "soc", ["Ascend910B2", "Ascend999"], on_result=lambda v, r: seen.append(v))
    assert seen == []


def test_what_if_plot_is_labelled():
    import matplotlib.pyplot as plt

    from opsim.analysis import what_if_plot

    from .test_plots import _check_labelled
    df = what_if(run_with, "env.ACLNN_CACHE_LIMIT", [2, 16])
    fig = what_if_plot(df, "env.ACLNN_CACHE_LIMIT", left=["exec_hit_rate"], right=["host_busy_us"])
    try:
        _check_labelled(fig)
        assert fig.axes[1].get_ylabel() == "host busy time (µs)"
    finally:
        plt.close(fig)


def test_aicpu_hit_rate_monotone_in_limit_on_direct_workload():
    from .conftest import run_aicpu
    df = what_if(run_aicpu, "env.ACLNN_AICPU_CACHE_LIMIT", [0, 2, 8, 16])
    assert _non_decreasing(df["aicpu_hit_rate"])
    assert _non_decreasing(-df["aicpu_oneshots"])
    # 2 threads x 6 dtypes = 12 keys: a limit of 16 caches them all, 0 caches nothing (every launch one-shot)
    assert list(df["aicpu_cached_tasks_peak"]) == [0, 2, 8, 12]
    assert df["aicpu_oneshots"].iloc[0] == df["aicpu_tasks"].iloc[0] == 48
    assert df["aicpu_hit_rate"].iloc[-1] == pytest.approx(36 / 48)
