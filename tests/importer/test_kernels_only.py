"""A kernels-only profile (kernel_details.csv without a host trace) replayed on the device side."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from opsim.cli import main
from opsim.importer import import_profile, write_import

TABLE = Path(__file__).resolve().parents[1] / "data" / "real" / "alexnet_910b_rank0" / "kernel_details.csv"
REAL_STEP = TABLE.with_name("step_trace_time.csv")


def test_every_row_becomes_a_device_task(tmp_path):
    res = import_profile(TABLE)
    assert res.report.figures["kernels_only"] and res.report.warnings == {}
    assert res.report.figures["device_tasks"] == {"communication": 4, "recorded": 187}  # all 191 rows


@pytest.mark.slow
def test_replay_matches_the_profile(tmp_path):
    """Communication is exact; Computing is 7% short of torch_npu's step figure (the table lacks tasks the
    trace has)."""
    from opsim.scenario.runner import run_scenario
    out = write_import(import_profile(TABLE), tmp_path / "k.yaml")
    run_scenario(out.scenario_path, out_dir=tmp_path / "replay", profiler_output=True)
    (path,) = (tmp_path / "replay").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
    row, real = next(csv.DictReader(path.open())), next(csv.DictReader(REAL_STEP.open()))
    assert abs(float(row["Communication"]) / float(real["Communication"]) - 1) < 1e-5
    assert abs(float(row["Computing"]) / float(real["Computing"]) - 1) < 0.08


@pytest.mark.parametrize("column, value", [("Start Time(us)", "soon"), ("Duration(us)", "-3"),
                                           ("Stream ID", "x"), ("Duration(us)", "1e999")])
def test_damaged_row_exits_2_naming_file_line_and_column(tmp_path, column, value):
    rows = list(csv.reader(io.StringIO(TABLE.read_text())))
    rows[5][rows[0].index(column)] = value
    p = tmp_path / "kernel_details.csv"
    with p.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    err = io.StringIO()
    code = main(["import", str(p), "-o", str(tmp_path / "s.yaml")], stdout=io.StringIO(), stderr=err)
    text = err.getvalue().strip()
    assert code == 2 and str(p) in text and column in text and len(text.splitlines()) == 1, text
    assert not (tmp_path / "s.yaml").exists()


def _rank(root: Path, name: str, trace: bytes) -> None:
    d = root / f"{name}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    d.mkdir(parents=True)
    (d / "trace_view.json").write_bytes(trace)


def test_a_folder_of_ranks_imports_each_rank(tmp_path):
    trace = (TABLE.with_name("trace_view.json")).read_bytes()
    _rank(tmp_path / "ranks", "rank0", trace)
    _rank(tmp_path / "ranks", "rank1", trace)
    out = io.StringIO()
    code = main(["import", str(tmp_path / "ranks"), "-o", str(tmp_path / "s.yaml")], stdout=out,
                stderr=io.StringIO())
    assert code == 0
    assert (tmp_path / "s_rank0_ascend_pt.yaml").exists() and (tmp_path / "s_rank1_ascend_pt.yaml").exists()


def test_a_damaged_rank_exits_2_naming_its_file(tmp_path):
    _rank(tmp_path / "ranks", "rank0", TABLE.with_name("trace_view.json").read_bytes()[:4000])
    err = io.StringIO()
    code = main(["import", str(tmp_path / "ranks"), "-o", str(tmp_path / "s.yaml")], stdout=io.StringIO(),
                stderr=err)
    text = err.getvalue().strip()
    assert code == 2 and "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json: not valid JSON" in text
    assert len(text.splitlines()) == 1
