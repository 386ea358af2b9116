"""The family model, SoC evidence, leave-one-profile-out and how calibrations compose with the defaults."""
from __future__ import annotations

import pytest

from opsim.calibration import calibrate, read_profiles, socs_of
from opsim.calibration.soc_evidence import match_preset, soc_evidence
from opsim.calibration.validate import held_out_table, leave_one_out, render_held_out
from opsim.device.cost import CostModel
from opsim.device.family import family_of
from opsim.device.fitted_io import family_from_dict, family_to_dict, fitted_from_dict
from opsim.device.soc import get_soc
from opsim.errors import CalibrationError
from opsim.ingest import read_kernels

from .conftest import MATMUL, REAL, TRAINING

ALEXNET = REAL / "kernel_details_910b_alexnet_level1_rank0.csv"


@pytest.mark.parametrize("op, core, family", [
    ("MatMulV2", "AI_CORE", "cube"), ("Conv2DBackpropFilter", "AI_CORE", "cube"),
    ("FlashAttentionScoreGrad", "MIX_AIC", "cube"), ("Add", "AI_VECTOR_CORE", "vector"),
    ("ReduceSum", "MIX_AIV", "reduce"), ("LayerNormV3", "AI_VECTOR_CORE", "reduce"),
    ("TransData", "AI_VECTOR_CORE", "move"), ("GatherV2", "AI_VECTOR_CORE", "move"),
    ("MemSet", "AI_VECTOR_CORE", "memset"), ("Cast", "AI_CPU", "aicpu"), ("DSAGenBitMask", "DSA_SQE", "other")])
def test_families(op, core, family):
    assert family_of(op, core) == family


@pytest.mark.parametrize("path, preset, clock", [(TRAINING, "Ascend910B1", 1850), (MATMUL, "Ascend910B3", 1800),
                                                 (ALEXNET, "Ascend910B2", 1800)])
def test_profiles_name_their_soc(path, preset, clock):
    ev = soc_evidence(read_kernels(path))
    assert ev.clock_mhz == pytest.approx(clock, abs=1) and match_preset(ev) == preset
    assert get_soc(preset).clock_mhz == clock  # the preset agrees with the evidence


def test_leave_one_profile_out_reports_each_profile_and_family():
    records, _t, sources = read_profiles([TRAINING, MATMUL, ALEXNET])
    groups: dict = {}
    for r in records:
        groups.setdefault(r.source, []).append(r)
    res = leave_one_out(groups, socs_of(sources))
    assert set(res) == set(groups) and all(res[g] for g in groups)
    rows = held_out_table(res)
    assert {r.family for r in rows if r.profile == str(MATMUL)} == {"all", "cube", "vector"}
    assert all(r.n > 0 and 0 <= r.within_25 <= 1 for r in rows)
    assert "summed time err" in render_held_out(rows)


def test_calibration_refines_only_where_it_has_evidence():
    cal = calibrate([MATMUL])
    assert cal.soc == "Ascend910B3"  # named by the profile's own clock and block dims
    t = cal.timing
    same = CostModel(get_soc("Ascend910B3"), fitted=t)
    # a MatMul of the size it measured: the calibration's op-type line
    assert same.predict("MatMulV3", "AI_CORE", 2 * 1536 * 4096 * 8192.0, 1.3e8, 20).source == "calibration"
    # 1000x larger: never the line extrapolated
    far = same.predict("MatMulV3", "AI_CORE", 2e15, 1.3e11, 20)
    assert not (far.level == "op type" and far.source == "calibration")
    # an op type it never saw: the defaults answer
    assert same.predict("Softmax", "AI_VECTOR_CORE", 1e6, 4e6, 40).source in ("built-in fits", "family model")
    # on another SoC its absolute op-type lines do not apply; its factors over the family model may
    other = CostModel(get_soc("Ascend910B2"), fitted=t).predict("MatMulV3", "AI_CORE", 2 * 1536 * 4096 * 8192.0,
                                                                 1.3e8, 20)
    assert other.level != "signature" and (other.level, other.source) != ("op type", "calibration") or \
        t.family is not None and ("MatMulV3", "cube") in t.family.op_types


def test_family_section_round_trips_and_names_bad_fields():
    from opsim.device.cost import default_family
    m = default_family()
    assert family_to_dict(family_from_dict(family_to_dict(m), "x")) == family_to_dict(m)
    bad = {"device": {"family": {"families": {"cube": {"overhead_us": 1, "compute_eff": -1, "hbm_eff": 1,
                                                      "core_bw": 1}}}}}
    with pytest.raises(CalibrationError, match=r"f.yaml: field device\.family\.families\.cube\.compute_eff"):
        fitted_from_dict(bad, "f.yaml")
    with pytest.raises(CalibrationError, match="unknown family"):
        fitted_from_dict({"device": {"family": {"families": {"gpu": {}}}}}, "f.yaml")


def test_calibrate_validate_prints_leave_one_profile_out(tmp_path):
    import io

    from opsim.cli import main
    out, err = io.StringIO(), io.StringIO()
    assert main(["calibrate", str(MATMUL), str(ALEXNET), "-o", str(tmp_path / "c.yaml"), "--validate"],
                stdout=out, stderr=err) == 0, err.getvalue()
    text = out.getvalue()
    assert "5-fold cross-validation" in text and "leave-one-profile-out" in text
    assert f"{MATMUL}  all" in text.replace("  ", "  ") or str(MATMUL) in text
    out = io.StringIO()
    assert main(["calibrate", str(MATMUL), "-o", str(tmp_path / "d.yaml"), "--validate"], stdout=out,
                stderr=err) == 0
    assert "needs kernels from at least two profiles" in out.getvalue()
