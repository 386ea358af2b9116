"""Every plot returns a Figure with a title, axis labels with units and a legend; the numbers behind the
utilisation and phase plots add up to the trace."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.figure import Figure

from opsim.analysis import PLOTS, phase_table, timeline, utilisation_table
from opsim.api import Result
from opsim.trace.recorder import COLUMNS


def _check_labelled(fig):
    assert isinstance(fig, Figure)
    ax = fig.axes[0]
    assert ax.get_title()
    for label in (ax.get_xlabel(), ax.get_ylabel()):
        assert label and "(" in label and label.endswith(")"), label  # "quantity (unit)"
    legend = ax.get_legend()
    assert legend is not None and legend.get_texts()


@pytest.mark.parametrize("run", ["small_result", "aicpu_result"])
@pytest.mark.parametrize("name", sorted(PLOTS))
def test_plot_returns_labelled_figure(request, run, name):
    fig = PLOTS[name](request.getfixturevalue(run))
    try:
        _check_labelled(fig)
        fig.canvas.draw()  # renders without error
    finally:
        plt.close(fig)


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_plot_of_an_empty_run_is_still_labelled(name):
    empty = Result({k: {c: [] for c in cols} for k, cols in COLUMNS.items()})
    fig = PLOTS[name](empty)
    try:
        _check_labelled(fig)
    finally:
        plt.close(fig)


def test_timeline_rows_and_links(small_result):
    fig = timeline(small_result, start=0.0, end=small_result.makespan_us / 2)
    try:
        ax = fig.axes[0]
        rows = [t.get_text() for t in ax.get_yticklabels()]
        assert rows[:2] == ["thread t0", "thread t1"]
        assert "Stream 0" in rows and "Stream 1" in rows and "pool aicore" in rows and "pool vector" in rows
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "host → device launch" in legend and "API aclnnAdd" in legend and "op MatMulV2" in legend
        assert ax.get_xlim() == pytest.approx((0.0, small_result.makespan_us / 2))
    finally:
        plt.close(fig)


def test_utilisation_integrates_to_busy_unit_time(small_result):
    table = utilisation_table(small_result, bins=40)
    width = table.index[1] - table.index[0]
    dev = small_result.device_tasks
    for pool, capacity in small_result.pools.items():
        sub = dev[dev["unit_kind"] == pool]
        busy = (sub["units"] * (sub["end"] - sub["start"])).sum()
        assert table[pool].sum() * capacity * width == pytest.approx(busy, rel=1e-9, abs=1e-9)
        assert (table[pool] >= -1e-12).all() and (table[pool] <= 1 + 1e-12).all()


def test_phase_table_sums_to_host_time(small_result):
    table = phase_table(small_result)
    calls = small_result.op_calls.groupby("api").size()
    per_api = (table.sum(axis=1) * calls.reindex(table.index)).to_numpy()
    busy = small_result.op_calls.groupby("api")["host_busy_us"].sum().reindex(table.index).to_numpy()
    assert np.allclose(per_api, busy)
    assert list(table.columns[:2]) == ["L2 phase1 entry", "make key"]  # opbase phase order, not alphabetical


def test_every_charged_phase_name_has_a_timeline_group():
    from opsim.analysis.plots import PHASE_GROUPS
    from opsim.device.cost import HOST_PHASES
    from opsim.opdev.aicpu.kernel_lib import ONE_TIME_PHASES
    grouped = {p for names in PHASE_GROUPS.values() for p in names}
    assert set(HOST_PHASES) | set(ONE_TIME_PHASES) <= grouped


def test_cache_plot_shows_both_caches_and_one_shots(aicpu_result):
    from opsim.analysis import cache_hit_rate
    fig = cache_hit_rate(aicpu_result, window=8)
    try:
        legend = " | ".join(t.get_text() for t in fig.axes[0].get_legend().get_texts())
        assert "AI CPU task cache" in legend and "one-shot share (32 tasks)" in legend
        assert "executor cache" in legend and "last 8 lookups" in legend
    finally:
        plt.close(fig)


@pytest.fixture(scope="module")
def quickstart_result():
    from pathlib import Path

    from opsim.scenario.runner import run_scenario
    path = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"
    return Result.from_run(run_scenario(path, write=False))


def test_phase_breakdown_shows_acl_apis_one_launch_and_no_startup(quickstart_result):
    from opsim.analysis import phase_breakdown
    for startup in (False, True):
        fig = phase_breakdown(quickstart_result, startup=startup)
        try:
            ax = fig.axes[0]
            apis = [t.get_text() for t in ax.get_xticklabels()]
            phases = [t.get_text() for t in ax.get_legend().get_texts()]
        finally:
            plt.close(fig)
        assert apis and all(a.startswith("aclnn") for a in apis)  # no RecordEvent / StreamWaitEvent
        assert [p.lower() for p in phases].count("launch") == 1
        assert ("load aicpu kernel json" in phases) is startup


def test_timeline_squeezes_the_startup_unless_asked(quickstart_result):
    from opsim.analysis.plots import _idle_gap, startup_window
    window = startup_window(quickstart_result)
    gap = _idle_gap(quickstart_result, window)  # the idle part of the start-up (device tasks may overlap its start)
    assert gap is not None
    assert window is not None and window[1] - window[0] >= 2000.0
    fig = timeline(quickstart_result)
    full = timeline(quickstart_result, startup=True)
    try:
        ax, ax_full = fig.axes[0], full.axes[0]
        assert ax.get_xscale() == "function" and ax_full.get_xscale() == "linear"
        # the squeezed stretch takes a sliver of the axis: most of the width shows the run's work
        to_px = ax.transData.transform
        width = ax.get_window_extent().width
        assert (to_px((gap[1], 0))[0] - to_px((gap[0], 0))[0]) < 0.1 * width
        assert any("start-up" in t.get_text() for t in ax.get_legend().get_texts())
        fig.canvas.draw()
    finally:
        plt.close(fig)
        plt.close(full)
