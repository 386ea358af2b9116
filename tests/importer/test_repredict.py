"""`repredict: true`: an imported kernel keeps the work of its kernel_details.csv row, so a SoC what-if re-predicts
its device time through the predictor (opsim.device.predictor) instead of replaying the recorded duration."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from opsim.errors import ScenarioError
from opsim.importer import import_profile, write_import
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario

ALEXNET = Path(__file__).resolve().parents[1] / "data" / "real" / "alexnet_910b_rank0"
KERNELS = ("aclnnInplaceRelu_Relu_Relu", "aclnnAddmm_MatMulCommon_MatMulV2", "Conv2D1", "trans_TransData_0")
"""Kernels of an ACLNN call (vector, cube) and of an aclop call (Conv2D and its TransData)."""


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    return write_import(import_profile(ALEXNET), tmp_path_factory.mktemp("rp") / "imported.yaml")


def _recorded(scenario: dict) -> dict[str, list[dict]]:
    """Kernel name -> its definition in every variant of every profiled op."""
    out = defaultdict(list)
    for entry in scenario["profiled_ops"].values():
        for v in entry["variants"]:
            for k in v["kernels"]:
                out[k["name"]].append(k)
    return out


def _replayed(res) -> dict[str, set[float]]:
    dev = res.sim.recorder.records("device")
    out = defaultdict(set)
    for op, s, e in zip(dev["op"], dev["start"], dev["end"]):
        out[op].add(round(e - s, 6))
    return out


@pytest.fixture(scope="module")
def runs(imported):
    path = imported.scenario_path
    return {key: run_scenario(path, write=False, overrides=over) for key, over in (
        ("recorded", {"soc": "Ascend910B4"}),
        ("repredicted", {"soc": "Ascend910B4", "repredict": True}))}


def test_imported_kernels_keep_their_recorded_work(imported):
    kernels = _recorded(imported.scenario)
    for name in KERNELS:
        for k in kernels[name]:
            assert k["type"] and k["work"]["flops"] > 0 and k["work"]["bytes"] > 0 and k["work"]["itemsize"] == 4


def test_a_soc_what_if_without_repredict_replays_the_recorded_durations(imported, runs):
    got = _replayed(runs["recorded"])
    kernels = _recorded(imported.scenario)
    for name in KERNELS:
        want = sorted({round(k["duration_us"], 6) for k in kernels[name]})
        assert sorted(got[name]) == pytest.approx(want, abs=1e-6), name


def test_repredict_gives_the_predictors_durations_on_that_soc(imported, runs):
    res = runs["repredicted"]
    cost = res.sim.cost
    assert res.sim.soc.name == "Ascend910B4"
    got = _replayed(res)
    kernels = _recorded(imported.scenario)
    for name in KERNELS:
        want = {round(cost.kernel(k["type"], k["task_type"], k["work"]["flops"], k["work"]["bytes"], k["block_dim"],
                                  itemsize=k["work"]["itemsize"]), 6) for k in kernels[name]}
        assert sorted(got[name]) == pytest.approx(sorted(want), abs=1e-6), name
        assert got[name] != {round(k["duration_us"], 6) for k in kernels[name]}, name
    # a copy (no op type) keeps its recorded time
    assert got["MEMCPY_ASYNC"] == _replayed(runs["recorded"])["MEMCPY_ASYNC"]


@pytest.mark.parametrize("bad, where", [
    ("not-a-bool", "repredict"),
    ({"flops": -1}, "work"),
    ({"flops": 1, "bytes": 1, "itemsize": 0}, "itemsize"),
])
def test_bad_repredict_inputs_name_their_field(imported, bad, where):
    import yaml
    data = yaml.safe_load(imported.scenario_path.read_text())
    if where == "repredict":
        data["repredict"] = bad
    else:
        data["profiled_ops"]["aclnnInplaceRelu"]["variants"][0]["kernels"][0]["work"] = bad
    data.pop("calibration", None)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(data)
    assert where in str(exc.value)
