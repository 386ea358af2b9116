"""The default host model: any ACLNN API gets phase-1 / phase-2 costs (API, family or all), the shipped file
is what docs/refit_host.py fits on tests/data/real/host_calls_public.csv, and `opsim predict` appends
`Predicted Avg(us)` to an api_statistic.csv."""
from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from opsim.calibration.host_fit import HostCall, fit_host_model, read_calls_csv
from opsim.calibration.predict_host import PREDICTED_AVG_COLUMN
from opsim.cli import EXIT_BAD_INPUT, main
from opsim.device.host_model import KINDS, HostModel, api_family, default_host_model

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "data" / "real"
STATS = REAL / "api_statistic_alexnet_rank0.csv"


@pytest.mark.parametrize("api, family", [
    ("aclnnInplaceAdd", "elementwise"), ("aclnnMm", "matmul"), ("aclnnAddmm", "matmul"),
    ("aclnnBatchMatMul", "matmul"), ("aclnnConvolutionBackward", "conv"), ("aclnnFlashAttentionScore", "attention"),
    ("aclnnRmsNorm", "norm"), ("aclnnLogSoftmaxBackward", "softmax_loss"), ("aclnnNLLLoss", "softmax_loss"),
    ("aclnnMaxPool2dWithMaskBackward", "pool"), ("aclnnForeachAddListV2", "foreach"),
    ("aclnnDropoutGenMaskV2", "random"), ("aclnnReduceSum", "reduce"), ("aclnnTopk", "reduce"),
    ("aclnnInplaceCopy", "copy_fill"), ("aclnnCast", "copy_fill"), ("aclnnGatherV2", "data_movement"),
    ("aclnnThresholdBackward", "elementwise"), ("aclnnSomethingNew", "elementwise"),
])
def test_api_family(api, family):
    assert api_family(api) == family


def test_any_api_gets_every_kind_from_the_most_specific_level():
    m = default_host_model()
    for api in ("aclnnInplaceAdd", "aclnnMm", "aclnnNeverProfiledMatmul", "aclnnCompletelyUnknown", "x"):
        for kind in KINDS:
            us, level = m.predict(api, kind)
            assert 0.5 < us < 1000.0 and level in ("api", "family", "all")
        t = m.timing(api)
        assert t.phase1_us() is not None and t.phase2_us(hit=True) is not None and t.phase2_us(hit=False) is not None
    assert m.predict("aclnnInplaceAdd", "phase2_hit")[1] == "api"
    assert m.predict("aclnnBatchMatMulNeverSeen", "phase2_hit")[1] == "family"
    assert m.predict("aclnnMm", "phase2_miss")[1] in ("family", "all")  # the profiles only saw its hits
    # a miss builds the executor, a hit replays it: the fitted medians say so at every level
    assert m.kinds["phase2_miss"].median_us > m.kinds["phase2_hit"].median_us
    with pytest.raises(ValueError, match="kind must be"):
        m.predict("aclnnAdd", "phase3")


def test_shipped_model_is_the_fit_of_the_shipped_calls():
    calls = read_calls_csv(REAL / "host_calls_public.csv")
    assert len({c.profile for c in calls}) == 7 and len(calls) > 800
    shipped = yaml.safe_load((ROOT / "opsim" / "device" / "host_defaults.yaml").read_text())
    assert shipped == yaml.safe_load(yaml.safe_dump(fit_host_model(calls, machines=True).to_dict()))
    assert HostModel.from_dict(shipped).predict("aclnnMuls", "phase2_hit") == \
        default_host_model().predict("aclnnMuls", "phase2_hit")


def test_each_profile_weighs_the_same_and_the_tensor_term_scales_the_family_level():
    calls = [HostCall("a", "a.json", i, "aclnnAdd", "phase2_hit", 10.0, 2) for i in range(99)]
    calls += [HostCall("b", "b.json", 1, "aclnnAdd", "phase2_hit", 30.0, 2),
              HostCall("c", "c.json", 1, "aclnnMul", "phase2_hit", 40.0, 8)]
    m = fit_host_model(calls)
    assert m.apis[("aclnnAdd", "phase2_hit")].median_us == 20.0  # median of 10 (a) and 30 (b), not of 100 calls
    assert m.apis[("aclnnAdd", "phase2_hit")].n == 2
    assert m.families[("elementwise", "phase2_hit")].median_us == 30.0
    assert 0.0 < m.tensor_slope <= 1.0
    base = m.predict("aclnnSub", "phase2_hit")[0]
    assert m.predict("aclnnSub", "phase2_hit", n_tensors=16)[0] > base > m.predict("aclnnSub", "phase2_hit", 1)[0]
    assert fit_host_model(calls, tensors=False).tensor_slope == 0.0


def test_launched_tasks_add_their_cost_and_the_slope_comes_from_wide_launch_differences():
    calls = [HostCall("a", "a", 1, "aclnnMm", "phase2_hit", 10.0, None, 1),
             HostCall("b", "b", 1, "aclnnMm", "phase2_hit", 42.0, None, 9),
             HostCall("a", "a", 2, "aclnnAdd", "phase2_hit", 8.0, None, 2),
             HostCall("b", "b", 2, "aclnnAdd", "phase2_hit", 7.0, None, 3)]
    m = fit_host_model(calls)
    assert m.launch_us == pytest.approx((8 * 32 + 1 * -1) / (64 + 1))
    base, level = m.predict("aclnnMm", "phase2_hit")
    assert m.predict("aclnnMm", "phase2_hit", n_launches=13)[0] == pytest.approx(base + m.launch_us * 8)
    assert m.predict("aclnnMm", "phase2_hit", n_launches=0)[0] >= 0.25 * base  # never below a quarter
    assert m.predict("aclnnMm", "phase1", n_launches=13) == m.predict("aclnnMm", "phase1")
    assert fit_host_model(calls, launches=False).launch_us == 0.0


def test_db_launch_counts_on_the_real_excerpt():
    from opsim.ingest import iter_db_api_events
    from opsim.ingest.profiler_db import db_launch_counts
    db = REAL / "ascend_pytorch_profiler_alexnet_rank0_excerpt.db"
    counts = db_launch_counts(db)
    by_api = {e.api: counts[e.event.index + 1] for e in iter_db_api_events(db) if e.kind == "phase2"}
    assert by_api["aclnnInplaceRelu"] == 1 and by_api["aclnnMaxPool2dWithMask"] == 3


def test_predict_appends_predicted_avg_to_an_api_statistic(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    code = main(["predict", str(STATS), "-o", str(tmp_path / "p.csv")], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert "32 ACLNN API row(s) predicted" in out.getvalue()
    src = STATS.read_text(encoding="utf-8").splitlines()
    got = (tmp_path / "p.csv").read_text(encoding="utf-8").splitlines()
    assert got[0] == src[0] + "," + PREDICTED_AVG_COLUMN and len(got) == len(src)
    for s, g in zip(src[1:], got[1:]):
        assert g.startswith(s + ",")
        value = g[len(s) + 1:]
        assert (value != "") == (",aclnn" in s)
        if value:
            assert 0.5 < float(value) < 1000.0


def test_predict_uses_a_calibration_first(tmp_path):
    cal = tmp_path / "cal.yaml"
    assert main(["calibrate", str(STATS), "-o", str(cal)], stdout=io.StringIO(), stderr=io.StringIO()) == 0
    assert main(["predict", str(STATS), "--calibration", str(cal), "-o", str(tmp_path / "p.csv")],
                stdout=io.StringIO(), stderr=io.StringIO()) == 0
    rows = {line.split(",")[1]: line.split(",") for line in (tmp_path / "p.csv").read_text().splitlines()}
    assert float(rows["aclnnDivs"][-1]) == pytest.approx(60.125)  # the table's own mean, in-sample


def test_predict_refuses_a_bad_api_statistic_in_one_line(tmp_path):
    bad = tmp_path / "api_statistic.csv"
    bad.write_text("Level,API Name,Time(us),Count,Avg(us)\nacl,aclnnAdd,1,1,fast\n", encoding="utf-8")
    err = io.StringIO()
    code = main(["predict", str(bad), "-o", str(tmp_path / "p.csv")], stdout=io.StringIO(), stderr=err)
    assert code == EXIT_BAD_INPUT and err.getvalue().count("\n") == 1
    assert "row 2, column 'Avg(us)'" in err.getvalue() and not (tmp_path / "p.csv").exists()


def test_predict_of_a_fifo_or_a_renamed_api_statistic(tmp_path):
    import os
    os.mkfifo(tmp_path / "pipe.csv")
    err = io.StringIO()
    code = main(["predict", str(tmp_path / "pipe.csv"), "-o", str(tmp_path / "p.csv")], stdout=io.StringIO(),
                stderr=err)
    assert code == EXIT_BAD_INPUT and "not a regular file" in err.getvalue()  # refused, never opened
    renamed = tmp_path / "host_table.csv"
    renamed.write_bytes(STATS.read_bytes())
    out = io.StringIO()
    assert main(["predict", str(renamed), "-o", str(tmp_path / "q.csv")], stdout=out, stderr=io.StringIO()) == 0
    assert "ACLNN API row(s) predicted" in out.getvalue()


def test_a_profile_of_a_slower_machine_transfers_through_its_machine_factor():
    """One profile's machine factor, measured on the APIs it called, scales the APIs it did not: the mnist
    profile (another host) predicted from the AlexNet profiles only, per-API phase-2 median |error| 58% without
    the factor, under 25% with it (measured on the held-out profile's other APIs, never the one predicted)."""
    import importlib.util
    import statistics
    spec = importlib.util.spec_from_file_location("bench_host_model", ROOT / "benchmarks" / "host_model.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    calls = read_calls_csv(ROOT / "tests" / "data" / "real" / "host_calls_public.csv")
    train = [c for c in calls if not c.profile.startswith("mnist")]
    held = [c for c in calls if c.profile.startswith("mnist")]
    plain, _ = bench._errors(fit_host_model(train), held, "phase2")
    machine, _ = bench._errors(fit_host_model(train, machines=True), held, "phase2", machine=True)
    assert statistics.median(plain) > 0.4
    assert statistics.median(machine) <= 0.25


def test_machine_factor_is_the_median_ratio_of_known_apis():
    from opsim.device.host_model import HostEstimate, HostModel
    m = HostModel(apis={("aclnnA", "phase2"): HostEstimate(10.0, 1), ("aclnnB", "phase2"): HostEstimate(20.0, 1),
                        ("aclnnC", "phase2"): HostEstimate(5.0, 1)})
    assert m.machine_factor({("aclnnA", "phase2"): 20.0, ("aclnnB", "phase2"): 40.0,
                             ("aclnnC", "phase2"): 50.0, ("aclnnZ", "phase2"): 1.0}) == 2.0
    assert m.machine_factor({("aclnnZ", "phase2"): 1.0}) is None
    assert m.machine_factor({("aclnnA", "phase2"): 0.0}) is None
    assert m.scaled(2.0).predict("aclnnA", "phase2") == (20.0, "api")
