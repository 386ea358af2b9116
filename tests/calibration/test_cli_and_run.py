"""`opsim calibrate`, `opsim predict`, and calibrations in runs (CLI, scenario key, Python API)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import opsim
from opsim.cli import EXIT_BAD_INPUT, EXIT_OK, main
from opsim.ingest import locate_profile, read_kernels, read_trace_view

from .conftest import MATMUL, TRACE, TRAINING

ADD_ONLY = {"name": "adds", "seed": 1,
            "outputs": {"trace": True, "csv": False, "timestamps": False, "summary": True, "profiler": True},
            "threads": [{"name": "main", "program": [
                {"loop": {"count": 3, "body": [{"op": "Add", "shape": [64, 64], "dtype": "float"}]}},
                {"sync": "default"}]}]}
HOST_ONLY_CAL = """\
opsim_calibration: 1
soc: null
device:
  op_types:
    Add@AI_VECTOR_CORE: {overhead_us: 123.0, n: 3, median_error: 0.0, provenance: [{file: k.csv, rows: 2-4}]}
host:
  apis:
    aclnnAdd:
      phase1: {median_us: 40.0, n: 2, provenance: [{file: t.json, rows: '7,9'}]}
      phase2_miss: {median_us: 30.0, n: 2}
      phase2_hit: {median_us: 10.0, n: 5}
"""


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_calibrate_writes_yaml_and_validates(tmp_path):
    target = tmp_path / "cal.yaml"
    code, out, err = cli("calibrate", TRAINING, TRACE, "-o", target, "--soc", "Ascend910B2", "--validate")
    assert code == EXIT_OK, err
    assert target.is_file() and "op-type fit(s)" in out
    assert "5-fold cross-validation" in out and "median |err|" in out and "\nall " in out


def test_calibrate_bad_profile_exits_2_and_writes_nothing(tmp_path):
    bad = tmp_path / "kernel_details.csv"
    bad.write_text("Type,Core\nAdd,AI_CORE\n")
    target = tmp_path / "cal.yaml"
    code, out, err = cli("calibrate", bad, "-o", target)
    assert code == EXIT_BAD_INPUT and "missing column(s) 'Accelerator Core'" in err and "Traceback" not in err
    assert not target.exists()


def test_predict_keeps_rows_and_appends_the_prediction(tmp_path, calibration_file):
    out_csv = tmp_path / "pred.csv"
    code, out, err = cli("predict", TRAINING, "--calibration", calibration_file, "-o", out_csv)
    assert code == EXIT_OK, err
    assert "547 kernel(s) predicted, 44 skipped" in out
    src = TRAINING.read_text().splitlines()
    got = out_csv.read_text().splitlines()
    assert len(got) == len(src) and got[0] == src[0] + (
        ",Predicted Duration(us),Predicted Low(us),Predicted High(us),Prediction Level")
    for a, b in zip(src[1:], got[1:]):
        assert b.startswith(a + ",")
    hccl = next(line for line in got if ",HCCL," in line)
    assert hccl.endswith(",,,,")  # skipped rows get an empty prediction
    us, low, high, level = got[1].rsplit(",", 4)[1:]
    assert 0 < float(low) <= float(us) <= float(high) and level in ("signature", "op type", "family", "roofline")


def test_predict_without_calibration_uses_the_defaults(tmp_path):
    out_csv = tmp_path / "pred.csv"
    assert cli("predict", MATMUL, "-o", out_csv)[0] == EXIT_OK
    table = read_kernels(out_csv)
    assert table.header[-4:] == ["Predicted Duration(us)", "Predicted Low(us)", "Predicted High(us)",
                                 "Prediction Level"] and len(table.rows) == 29


def test_predict_bad_input_exits_2_nothing_written(tmp_path):
    bad = tmp_path / "k.csv"
    bad.write_text(TRAINING.read_text().replace(",Cast,AI_VECTOR_CORE,", ",Cast,AI_VECTOR_CORE,x", 1))
    out_csv = tmp_path / "pred.csv"
    code, _out, err = cli("predict", bad, "-o", out_csv)
    assert code == EXIT_BAD_INPUT and "column 'Start Time(us)'" in err and "row " in err
    assert not out_csv.exists()
    code, _out, err = cli("predict", TRAINING, "--calibration", tmp_path / "none.yaml", "-o", out_csv)
    assert code == EXIT_BAD_INPUT and "no such calibration file" in err


def _phases(out_dir: Path) -> dict[str, list[float]]:
    (pt,) = out_dir.glob("*_ascend_pt")
    tv = read_trace_view(locate_profile(pt).trace_view)
    got: dict[str, list[float]] = {}
    for a in sorted(tv.acl_api_events(), key=lambda a: a.event.ts):
        if a.api == "aclnnAdd":
            got.setdefault(a.kind, []).append(a.event.dur / 1000)
    return got


def test_calibrated_run_reproduces_host_and_device_timing(tmp_path):
    cal = tmp_path / "cal.yaml"
    cal.write_text(HOST_ONLY_CAL)
    result = opsim.run(ADD_ONLY, out_dir=tmp_path / "out", calibration=cal)
    phases = _phases(tmp_path / "out")
    assert phases["phase1"][0] == pytest.approx(40.0, abs=0.002)  # the first call misses the executor cache
    assert phases["phase2"] == pytest.approx([30.0, 10.0, 10.0], abs=0.002)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["calibration"] == str(cal)
    assert summary["streams"]["Stream 0"]["busy_us"] == pytest.approx(3 * 123.0)
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace["otherData"]["calibration"] == str(cal)
    plain = opsim.run(ADD_ONLY, out_dir=tmp_path / "plain")
    assert json.loads((tmp_path / "plain" / "summary.json").read_text())["calibration"] is None
    assert _phases(tmp_path / "plain")["phase1"][0] < 40.0
    assert plain.summary["simulated_makespan_us"] < result.summary["simulated_makespan_us"]


def test_uncalibrated_910b_runs_use_the_public_trace_medians(tmp_path):
    opsim.run(ADD_ONLY, out_dir=tmp_path / "b2")
    assert _phases(tmp_path / "b2")["phase1"][0] == pytest.approx(18.645, abs=0.002)  # defaults_910b.yaml
    opsim.run(dict(ADD_ONLY, soc="Ascend910A"), out_dir=tmp_path / "a")
    assert _phases(tmp_path / "a")["phase1"][0] == pytest.approx(4.6, abs=0.002)  # the assumed table


def test_scenario_key_is_relative_to_the_scenario_and_cli_flag_wins(tmp_path):
    import yaml
    (tmp_path / "cals").mkdir()
    (tmp_path / "cals" / "c.yaml").write_text(HOST_ONLY_CAL)
    scenario = dict(ADD_ONLY, calibration="cals/c.yaml")
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    code, _out, err = cli("run", path, "--out", tmp_path / "o1", "--quiet", "--no-progress")
    assert code == EXIT_OK, err
    assert json.loads((tmp_path / "o1" / "summary.json").read_text())["calibration"] == str(tmp_path / "cals" / "c.yaml")
    other = tmp_path / "other.yaml"
    other.write_text(HOST_ONLY_CAL)
    code, _out, err = cli("run", path, "--out", tmp_path / "o2", "--quiet", "--no-progress", "--calibration", other)
    assert code == EXIT_OK, err
    assert json.loads((tmp_path / "o2" / "summary.json").read_text())["calibration"] == str(other)


def test_bad_calibration_in_run_exits_2_naming_file_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("opsim_calibration: 1\nhost: {apis: {aclnnAdd: {phase1: {median_us: fast}}}}\n")
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(ADD_ONLY))
    code, _out, err = cli("run", path, "--out", tmp_path / "o", "--quiet", "--calibration", bad)
    assert code == EXIT_BAD_INPUT
    assert str(bad) in err and "host.apis.aclnnAdd.phase1.median_us" in err and "Traceback" not in err
    assert not (tmp_path / "o" / "summary.json").exists()
