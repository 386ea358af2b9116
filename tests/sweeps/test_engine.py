"""The sweep engine in this process: tidy rows, files written as points finish, --resume, failed points and
Ctrl-C keeping what finished."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from opsim.errors import InvalidArgumentError
from opsim.sweeps import load_sweep, sweep
from opsim.sweeps.engine import run_sweep
from opsim.sweeps.results import CSV, JOURNAL, PARQUET

from opsim.sweeps.point import PointTask

from .conftest import SMALL, write_sweep, without_wall

FIGURES = ["summary.simulated_makespan_us", "summary.exec_cache.hit_rate", "summary.memory.capacity_bytes",
           "summary.memory.peak_hbm_bytes", "summary.memory.peak_workspace_bytes",
           "summary.memory.in_use_at_end_bytes", "summary.memory.oom_events", "makespan_us"]


def test_rows_are_tidy_and_match_single_runs(reference, small_sweep):
    import opsim
    df = reference
    assert df.index.name == "point" and list(df.index) == list(range(8))
    assert list(df.columns) == ["env.ACLNN_CACHE_LIMIT", "soc", "seed", *FIGURES, "status", "error", "wall_seconds"]
    assert set(df["status"]) == {"ok"} and (df["error"] == "").all()
    assert df.attrs["params"] == ["env.ACLNN_CACHE_LIMIT", "soc"]
    # a row holds exactly what `opsim.run` of that point gives
    row = df.loc[5]
    one = opsim.run(small_sweep.parent / "quickstart.yaml", {"threads.1.program.0.loop.count": 2,
                    "env.ACLNN_CACHE_LIMIT": int(row["env.ACLNN_CACHE_LIMIT"]), "soc": row["soc"],
                    "seed": int(row["seed"])},
                    write=False)
    assert row["summary.simulated_makespan_us"] == one.summary["simulated_makespan_us"]
    assert row["summary.exec_cache.hit_rate"] == one.summary["exec_cache"]["hit_rate"]
    assert row["makespan_us"] == one.figures["makespan_us"]
    # the cache limit and the SoC matter in this workload
    assert df.groupby("env.ACLNN_CACHE_LIMIT")["summary.exec_cache.hit_rate"].mean().is_monotonic_increasing
    assert df["summary.simulated_makespan_us"].nunique() > 1


def test_files_hold_the_table_and_resume_skips_finished_points(small_sweep, tmp_path, reference):
    out = tmp_path / "res"
    df = sweep(small_sweep, workers=0, out=out)
    pd.testing.assert_frame_equal(without_wall(df), without_wall(reference))
    csv = pd.read_csv(out / CSV, index_col="point", keep_default_na=False)
    assert list(csv.columns) == list(df.columns) and len(csv) == 8
    pq = pd.read_parquet(out / PARQUET)
    pd.testing.assert_frame_equal(without_wall(pq), without_wall(df), check_like=False)
    assert (out / "sweep.yaml").read_text() == small_sweep.read_text()
    assert "name: quickstart" in (out / "scenario.yaml").read_text()
    with pytest.raises(InvalidArgumentError, match="already holds sweep results.*--resume"):
        sweep(small_sweep, workers=0, out=out)
    # drop three finished points from the journal: --resume runs exactly those again
    lines = (out / JOURNAL).read_text().splitlines()
    (out / JOURNAL).write_text("\n".join(lines[:5]) + "\n" + lines[5][:20])  # the last line cut short
    ran = []
    again = run_sweep(load_sweep(small_sweep), out=out, workers=0, resume=True, on_row=ran.append)
    assert sorted(r["point"] for r in ran) == [5, 6, 7]
    pd.testing.assert_frame_equal(without_wall(again), without_wall(df))
    pd.testing.assert_frame_equal(without_wall(pd.read_parquet(out / PARQUET)), without_wall(df))


def test_resume_after_adding_values_runs_only_new_points(small_sweep, tmp_path):
    out = tmp_path / "res"
    sweep(small_sweep, workers=0, out=out)
    small_sweep.write_text(small_sweep.read_text().replace("[1, 8]", "[1, 4, 8]"))
    ran = []
    df = run_sweep(load_sweep(small_sweep), out=out, workers=0, resume=True, on_row=ran.append)
    assert len(df) == 12 and sorted(r["point"] for r in ran) == [4, 5, 6, 7]  # the limit-4 points, numbered in
    assert list(df.loc[[4, 5, 6, 7], "env.ACLNN_CACHE_LIMIT"]) == [4] * 4       # sweep order


def test_failed_point_is_recorded_and_sweep_goes_on(tmp_path):
    calls = []

    def scenario(overrides):
        calls.append(overrides["env.ACLNN_CACHE_LIMIT"])
        if overrides["env.ACLNN_CACHE_LIMIT"] == 2:
            raise RuntimeError("boom at 2")
        import opsim
        return opsim.run(str(write_sweep(tmp_path).parent / "quickstart.yaml"), overrides, write=False)

    from opsim.sweeps.spec import one_parameter
    spec = one_parameter(scenario, "env.ACLNN_CACHE_LIMIT", [1, 2, 3], figures=("summary.op_calls",))
    df = run_sweep(spec, workers=0)
    assert calls == [1, 2, 3]
    assert list(df["status"]) == ["ok", "failed", "ok"]
    assert df.loc[1, "error"] == "RuntimeError: boom at 2" and pd.isna(df.loc[1, "summary.op_calls"])
    assert df.loc[0, "summary.op_calls"] == 34


def test_simulation_errors_keep_figures(tmp_path):
    path = write_sweep(tmp_path, """\
sweep: oom
scenario: {scenario}
grid:
  soc_overrides.hbm_bytes: [1048576, 68719476736]
figures: [summary.memory.oom_events]
""")
    df = sweep(path, workers=0)
    assert list(df["status"]) == ["errors", "ok"]
    assert df.loc[0, "summary.memory.oom_events"] > 0 and "failed call" in df.loc[0, "error"]


def test_interrupt_keeps_finished_rows(small_sweep, tmp_path):
    out = tmp_path / "res"

    def stop_after_three(row):
        if row["point"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(load_sweep(small_sweep), out=out, workers=0, on_row=stop_after_three)
    assert list(pd.read_csv(out / CSV)["point"]) == [0, 1, 2]
    assert len(pd.read_parquet(out / PARQUET)) == 3
    assert [json.loads(line)["point"] for line in (out / JOURNAL).read_text().splitlines()] == [0, 1, 2]
    ran = []
    df = run_sweep(load_sweep(small_sweep), out=out, workers=0, resume=True, on_row=ran.append)
    assert [r["point"] for r in ran] == [3, 4, 5, 6, 7] and len(df) == 8


def test_argument_errors(small_sweep):
    spec = load_sweep(small_sweep)
    with pytest.raises(InvalidArgumentError, match="workers=0"):
        run_sweep(spec, workers=2, on_result=lambda i, r: None)
    with pytest.raises(InvalidArgumentError, match="workers must be >= 0"):
        run_sweep(spec, workers=-1)
    with pytest.raises(InvalidArgumentError, match="scheduler must be an address"):
        run_sweep(spec, scheduler=3)


def test_on_result_sees_each_result(small_sweep):
    seen = []
    sweep(small_sweep, workers=0, on_result=lambda i, r: seen.append((i, r.summary["soc"])))
    assert [i for i, _ in seen] == list(range(8)) and seen[2][1] == "Ascend310P3"


def test_missing_dask_names_the_extra(small_sweep, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "distributed", None)
    from opsim.errors import OpsimError
    with pytest.raises(OpsimError, match=r"pip install opsim\[sweep\]"):
        sweep(small_sweep, workers=2)


def test_interrupt_swallowed_elsewhere_still_stops_the_sweep(small_sweep):
    """Python drops an exception raised inside a garbage-collector callback (Dask installs some); the sweep
    remembers the Ctrl-C and stops after the point in hand."""
    import os
    import signal
    import time

    from opsim.sweeps.engine import SweepInterrupted

    def swallow(row):
        if row["point"] == 1:
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler runs here
            except KeyboardInterrupt:
                pass  # lost, as in a gc callback

    with pytest.raises(SweepInterrupted) as stop:
        run_sweep(load_sweep(small_sweep), workers=0, on_row=swallow)
    assert (stop.value.done, stop.value.points) == (2, 8)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_opsim_sweep_is_the_python_entry_point():
    import opsim
    assert opsim.sweep is sweep


ADD_CAL = "opsim_calibration: 1\ndevice: {op_types: {Add@AI_VECTOR_CORE: {overhead_us: 77.0, n: 1}}}\n"
"""A calibration with its own overhead for vector-core Add kernels (77 us)."""

def test_calibration_file_travels_as_content(tmp_path, monkeypatch):
    """A scenario's `calibration` path means a file next to the scenario; the sweep loads it where it starts
    and sends the loaded calibration, so a worker in any directory times the run the same way."""
    import opsim
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "add_cal.yaml").write_text(ADD_CAL)
    (tmp_path / "scen").mkdir()
    scenario = tmp_path / "scen" / "add.yaml"
    scenario.write_text("name: add\ncalibration: ../cal/add_cal.yaml\nthreads:\n  - name: t\n    program:\n"
                        "      - {op: Add, shape: [64, 64], dtype: float}\n")
    path = tmp_path / "s.yaml"
    path.write_text("sweep: cal\nscenario: scen/add.yaml\ngrid: {seed: [1, 2]}\nfigures: [summary.calibration, "
                    "device_busy_us]\n")
    expected = opsim.run(scenario, write=False)
    plain = opsim.run({"name": "add", "threads": [{"name": "t", "program": [
        {"op": "Add", "shape": [64, 64], "dtype": "float"}]}]}, write=False)
    assert plain.figures["device_busy_us"] != expected.figures["device_busy_us"]  # the calibration matters
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "elsewhere" / "deep")  # ../cal/add_cal.yaml from here does not exist
    df = sweep(path, workers=0)
    assert list(df["status"]) == ["ok", "ok"]
    assert list(df["device_busy_us"]) == [expected.figures["device_busy_us"]] * 2
    assert df.loc[0, "summary.calibration"] == expected.summary["calibration"]


def test_batch_size_follows_the_first_point():
    from opsim.sweeps.engine import BATCH_SECONDS, batch_size
    # 30 ms points: enough per task for BATCH_SECONDS, capped so every worker gets at least two batches
    assert batch_size(0.03, 198, 2) == int(BATCH_SECONDS / 0.03)
    assert batch_size(0.001, 198, 2) == 50
    # points as long as a batch or longer travel alone; so does a sweep with one point left per worker
    assert batch_size(BATCH_SECONDS, 198, 2) == 1 and batch_size(5.0, 198, 2) == 1
    assert batch_size(0.01, 3, 2) == 1 and batch_size(0.0, 10, 1) == 5


def test_run_points_runs_a_batch_in_order(tmp_path):
    from opsim.sweeps.point import run_point, run_points
    spec = load_sweep(write_sweep(tmp_path, SMALL))
    tasks = [PointTask(p.index, spec.point_key(p), spec.scenario, spec.label, p.overrides, spec.figures)
             for p in spec.points()[:3]]
    batch = run_points(tasks)
    assert [o.index for o in batch] == [t.index for t in tasks]
    assert [o.figures for o in batch] == [run_point(t).figures for t in tasks]
