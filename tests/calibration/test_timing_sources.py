"""Device-time sources and levels in plain sight: summary.json, the run table, Result, and sweeps."""
from __future__ import annotations

from pathlib import Path

import pytest

import opsim
from opsim.sweeps.engine import mixed_sources_warning
from opsim.sweeps.point import timing_source_label
from opsim.trace.summary import render_table

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


@pytest.fixture(scope="module")
def quickstart():
    return opsim.run(SCENARIOS / "quickstart.yaml", write=False)


def test_summary_names_sources_levels_and_band(quickstart):
    timing = quickstart.device_timing
    assert timing["calibration"] is None
    assert set(timing["sources"]) <= {"calibration", "built-in fits", "family model", "roofline", "explicit"}
    assert set(timing["levels"]) <= {"signature", "op type", "family", "roofline", "explicit"}
    assert sum(v["share"] for v in timing["sources"].values()) == pytest.approx(1.0, abs=1e-3)
    assert sum(v["share"] for v in timing["levels"].values()) == pytest.approx(1.0, abs=1e-3)
    lo, hi = timing["makespan_band_us"]
    assert lo <= quickstart.summary["simulated_makespan_us"] <= hi
    table = render_table(quickstart.summary)
    assert "device time from" in table and "prediction levels" in table and "makespan band" in table


def test_a_calibrated_run_names_its_calibration(calibration_file):
    res = opsim.run(SCENARIOS / "quickstart.yaml", write=False, calibration=calibration_file)
    timing = res.device_timing
    assert timing["calibration"] == str(calibration_file)
    assert str(calibration_file) in render_table(res.summary)
    assert "calibration" in timing_source_label(res.summary)


def test_sweep_warns_when_points_use_different_sources():
    labels = ["family model", "family model"]
    assert mixed_sources_warning(labels) is None
    labels.append("roofline")
    w = mixed_sources_warning(labels)
    assert w is not None and "2 point(s): family model" in w and "1 point(s): roofline" in w


def test_a_preset_sweep_uses_one_source(tmp_path):
    """quickstart_socs: every preset's device time comes from the same source now (no warning)."""
    from opsim.sweeps import sweep
    df = sweep({"sweep": "socs", "scenario": str(SCENARIOS / "quickstart.yaml"),
                "grid": {"soc": ["Ascend910B2", "Ascend910A", "Ascend310P3"]},
                "figures": ["summary.simulated_makespan_us"]}, workers=0)
    assert set(df["status"]) == {"ok"} and "warnings" not in df.attrs
