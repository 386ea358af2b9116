"""calibrate(), the YAML round trip, bad files, host tables, cross-validation and the plot."""
from __future__ import annotations

import matplotlib
import pytest
import yaml

from opsim.calibration import Calibration, calibrate
from opsim.calibration.validate import cross_validate, error_table, render_error_table
from opsim.errors import CalibrationError, ProfileFormatError
from opsim.ingest import read_kernels

from .conftest import MATMUL, TRACE, TRAINING

matplotlib.use("Agg")


def test_fits_per_op_type_and_core_with_provenance(real_calibration):
    t = real_calibration.timing
    add = t.op_types[("Add", "AI_VECTOR_CORE")]
    assert add.n == 43 and add.median_error < 0.25
    assert add.provenance[0].file == str(TRAINING) and len(add.provenance[0].rows) == 43
    assert set(t.cores) == {"AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MIX_AIV", "DSA_SQE"}
    assert ("Tril", "AI_VECTOR_CORE") not in t.op_types  # one kernel: the core fit (or its signature) answers
    assert t.signatures


def test_host_medians_hits_and_misses(real_calibration):
    add = real_calibration.host_api("aclnnAdd")  # phase 1 only in this profile (torch_npu calls InplaceAdd)
    assert add.phase1.n == 10 and add.phase1_us() == pytest.approx(18.64, abs=0.01) and add.phase2 is None
    divs = real_calibration.host_api("aclnnDivs")
    assert divs.phase1.n == 10 and divs.phase2.n == 12
    assert divs.phase2_miss.n == 10 and divs.phase2_hit.n == 2
    # an API opsim does not model still has its timings
    inplace_add = real_calibration.host_api("aclnnInplaceAdd")
    assert inplace_add.phase2.n == 22 and inplace_add.phase2_us(hit=True) == pytest.approx(7.17)
    assert real_calibration.host_api("aclnnNeverCalled") is None


def test_yaml_round_trip(real_calibration, calibration_file):
    text = calibration_file.read_text()
    assert text.startswith("# opsim calibration")
    data = yaml.safe_load(text)
    assert data["device"]["op_types"]["Add@AI_VECTOR_CORE"]["n"] == 43
    loaded = Calibration.load(calibration_file)
    assert loaded.name == str(calibration_file)
    assert loaded.timing.op_types.keys() == real_calibration.timing.op_types.keys()
    assert loaded.timing.host_apis.keys() == real_calibration.timing.host_apis.keys()
    add = loaded.timing.op_types[("Add", "AI_VECTOR_CORE")]
    assert add.predict(1e4, 1e6, 8) == pytest.approx(
        real_calibration.timing.op_types[("Add", "AI_VECTOR_CORE")].predict(1e4, 1e6, 8), rel=1e-5)
    assert loaded.timing.op_types[("Add", "AI_VECTOR_CORE")].provenance == \
        real_calibration.timing.op_types[("Add", "AI_VECTOR_CORE")].provenance


@pytest.mark.parametrize("text, field", [
    ("opsim_calibration: 1\ndevice: {cores: {AI_CORE: {overhead_us: -1}}}\n", "device.cores.AI_CORE.overhead_us"),
    ("opsim_calibration: 1\ndevice: {op_types: {Add: {overhead_us: 1}}}\n", "device.op_types.Add"),
    ("opsim_calibration: 1\nhost: {apis: {aclnnAdd: {phase3: {median_us: 1}}}}\n", "host.apis.aclnnAdd.phase3"),
    ("opsim_calibration: 1\nhost: {apis: {aclnnAdd: {phase1: {n: 3}}}}\n", "host.apis.aclnnAdd.phase1.median_us"),
    ("opsim_calibration: 1\ndevice: {cores: {X: {overhead_us: 1, provenance: [{file: a, rows: 5-2}]}}}\n",
     "device.cores.X.provenance[0].rows"),
    ("opsim_calibration: 2\n", "opsim_calibration"),
    ("name: not a calibration\n", "opsim_calibration"),
    ("opsim_calibration: 1\nsoc: 3\n", "soc"),
])
def test_bad_file_names_file_and_field(tmp_path, text, field):
    p = tmp_path / "cal.yaml"
    p.write_text(text)
    with pytest.raises(CalibrationError) as info:
        Calibration.load(p)
    assert str(p) in str(info.value) and field in str(info.value)


def test_unreadable_yaml_and_missing_file(tmp_path):
    p = tmp_path / "cal.yaml"
    p.write_text("opsim_calibration: [1\n")
    with pytest.raises(CalibrationError, match=r"cal\.yaml:2:1: YAML syntax error"):
        Calibration.load(p)
    with pytest.raises(CalibrationError, match="no such calibration file"):
        Calibration.load(tmp_path / "missing.yaml")


def test_save_is_atomic_and_leaves_no_temporary(real_calibration, tmp_path):
    target = tmp_path / "c.yaml"
    target.write_text("old")
    real_calibration.save(target)
    assert target.read_text().startswith("# opsim calibration")
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_calibrate_needs_something_to_fit(tmp_path):
    p = tmp_path / "trace_view.json"
    p.write_text("[]")
    with pytest.raises(ProfileFormatError, match="no kernel with a duration and no AscendCL API event"):
        calibrate([p])


def test_soc_is_checked_and_recorded():
    assert calibrate([MATMUL], soc="ascend910b2").soc == "Ascend910B2"
    with pytest.raises(Exception, match="unknown SoC"):
        calibrate([MATMUL], soc="Ascend999")


def test_cross_validation_table_and_plot():
    from opsim.analysis import prediction_frame, predicted_vs_real
    preds = cross_validate(read_kernels(TRAINING).rows, k=5)
    assert len(preds) == 547
    rows = error_table(preds)
    assert rows[-1].op_type == "all" and rows[-1].n == 547
    assert rows[-1].median_error < 0.15 and rows[-1].within_25 > 0.75
    text = render_error_table(rows)
    assert text.splitlines()[0].split()[:3] == ["op", "type", "core"] and "all" in text
    fig = predicted_vs_real(preds)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log" and "median |error|" in ax.get_title()
    assert len(prediction_frame(preds)) == 547


def test_trace_alone_gives_host_only(tmp_path):
    cal = calibrate([TRACE])
    assert not cal.timing.cores and cal.host_api("aclnnMm").phase2.n == 6
