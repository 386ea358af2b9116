"""`opsim calibrate` measures torch_npu's task-queue phases from Enqueue / Dequeue@ events, the calibration
file carries them (`host.phases`), and a calibrated run charges them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from opsim.calibration import Calibration, calibrate
from opsim.device.cost import HOST_PHASES, CostModel
from opsim.errors import CalibrationError


def _trace(path: Path) -> Path:
    """Two queued aclnnAdd calls: Enqueue 4 and 6 us; Dequeue@ 20 us around a 10 us call (overhead 10 us);
    the second job was queued before the first dequeue ended, so the 3 us between them is a gap."""
    ev = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
          {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CANN"}}]

    def x(name, pid, tid, ts, dur, **args):
        ev.append({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "dur": dur, "args": args})
    x("Enqueue", 1, 7, 100.0, 4.0, correlation_id=1)
    x("Enqueue", 1, 7, 106.0, 6.0, correlation_id=2)
    x("Dequeue@aclnnAdd", 1, 9, 105.0, 20.0, correlation_id=1)
    x("AscendCL@aclnnAdd", 2, 9, 110.0, 10.0)
    x("Dequeue@aclnnAdd", 1, 9, 128.0, 20.0, correlation_id=2)
    x("AscendCL@aclnnAdd", 2, 9, 133.0, 10.0)
    path.write_text(json.dumps(ev), encoding="utf-8")
    return path


def test_calibrate_measures_the_queue_phases_and_a_calibrated_model_uses_them(tmp_path):
    cal = calibrate(_trace(tmp_path / "trace_view.json"))
    phases = cal.timing.host_phases
    assert phases["enqueue"].median_us == pytest.approx(5.0) and phases["enqueue"].n == 2
    assert phases["dequeue"].median_us == pytest.approx(10.0)
    assert phases["dequeue gap"].median_us == pytest.approx(3.0) and phases["dequeue gap"].n == 1
    loaded = Calibration.load(cal.save(tmp_path / "cal.yaml"))
    assert loaded.timing.host_phases["dequeue"].provenance[0].rows
    model = CostModel(fitted=loaded.timing)
    assert model.host("enqueue") == pytest.approx(5.0) and model.host("dequeue gap") == pytest.approx(3.0)
    assert "measured" in dict((k, p) for k, _v, p in model.table())["enqueue"]
    assert CostModel().host("enqueue") == HOST_PHASES["enqueue"][0]
    assert CostModel(fitted=loaded.timing, overrides={"enqueue": 1.0}).host("enqueue") == 1.0


def test_an_unknown_host_phase_in_a_calibration_file_names_the_field(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("opsim_calibration: 1\ndevice: {}\nhost: {phases: {enqueu: {median_us: 1, n: 1}}}\n")
    with pytest.raises(CalibrationError, match=r"host\.phases\.enqueu"):
        Calibration.load(p)
