"""Profiled ops (a scenario's `profiled_ops:` section) and shared streams, on small hand-written scenarios."""
from __future__ import annotations

import glob
import json

import pytest

from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario

OPS = {
    "aclnnInplaceAdd": {
        "api": "aclnnInplaceAdd", "phase1_api": "aclnnAdd", "host_us": {"phase1": 30.0, "phase2": 12.0},
        "variants": [
            {"kernels": [{"name": "AddK", "duration_us": 1.5}]},
            {"kernels": [{"name": "AddK", "duration_us": 5.0}, {"name": "CastK", "task_type": "AI_VECTOR_CORE",
                                                                  "block_dim": 4, "duration_us": 2.0}]},
        ]},
    "aclop_Conv2D": {"api": "aclopCompileAndExecute", "kind": "aclop",
                     "variants": [{"host_us": {"phase2": 100.0},
                                   "kernels": [{"name": "Conv2D1", "duration_us": 20.0}]}]},
}


def scenario(program, **extra):
    return {"name": "p", "profiled_ops": json.loads(json.dumps(OPS)), "threads": [{"name": "t", "program": program}],
            **extra}


def _acl(tmp_path, sc):
    run_scenario(sc, out_dir=tmp_path, profiler_output=True)
    view = json.load(open(glob.glob(str(tmp_path / "*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"))[0]))
    return [(e["name"], float(e["dur"])) for e in view if e.get("ph") == "X" and e["name"].startswith("AscendCL@acl")
            and "aclrt" not in e["name"]]


def test_miss_then_hit_with_recorded_host_and_device_times(tmp_path):
    sc = scenario([{"op": "aclnnInplaceAdd", "shape": [1]}, {"op": "aclnnInplaceAdd", "shape": [1]},
                   {"op": "aclnnInplaceAdd", "shape": [1], "attrs": {"variant": 1}}])
    acl = _acl(tmp_path, sc)
    # phase 1 is named as the profile named it; a miss costs the recorded median, phase 2 always does
    assert acl[0] == ("AscendCL@aclnnAddGetWorkspaceSize", 30.0)
    assert acl[1] == ("AscendCL@aclnnInplaceAdd", 12.0)
    assert acl[2][0] == "AscendCL@aclnnAddGetWorkspaceSize" and acl[2][1] < 30.0  # a hit keeps opsim's cost
    assert acl[3] == ("AscendCL@aclnnInplaceAdd", 12.0)
    assert acl[4] == ("AscendCL@aclnnAddGetWorkspaceSize", 30.0)  # variant 1 is another key: a miss
    dev = run_scenario(sc, write=False).sim.recorder.records("device")
    assert [(op, round(e - s, 6), tt) for op, s, e, tt in zip(dev["op"], dev["start"], dev["end"], dev["task_type"])
            if tt != "HOST_FUNC"] == [("AddK", 1.5, "AI_CORE"), ("AddK", 1.5, "AI_CORE"), ("AddK", 5.0, "AI_CORE"),
                                      ("CastK", 2.0, "AI_VECTOR_CORE")]


def test_aclop_call_has_no_phase_1(tmp_path):
    acl = _acl(tmp_path, scenario([{"op": "aclop_Conv2D", "shape": [1]}]))
    assert acl == [("AscendCL@aclopCompileAndExecute", 100.0)]


def test_pta_hit_skips_phase_1(tmp_path):
    sc = scenario([{"op": "aclnnInplaceAdd", "shape": [1]}, {"sync_device": True},
                   {"op": "aclnnInplaceAdd", "shape": [1]}], env={"TASK_QUEUE_ENABLE": "1"})
    sc["threads"][0]["cache_mode"] = "pta"
    names = [n for n, _ in _acl(tmp_path, sc)]
    assert names == ["AscendCL@aclnnAddGetWorkspaceSize", "AscendCL@aclnnInplaceAdd", "AscendCL@aclnnInplaceAdd"]


def test_bad_profiled_ops_are_reported_with_their_path():
    sc = scenario([{"op": "aclnnInplaceAdd", "shape": [1], "attrs": {"variant": 5}}])
    sc["profiled_ops"]["aclnnInplaceAdd"]["variants"][0]["kernels"][0]["duration_us"] = -1
    with pytest.raises(ScenarioError) as err:
        load_scenario(sc)
    assert "profiled_ops.aclnnInplaceAdd.variants[0].kernels[0].duration_us" in str(err.value)
    sc = scenario([{"op": "aclnnInplaceAdd", "shape": [1], "attrs": {"variant": 5}}])
    with pytest.raises(ScenarioError, match="variant 5 does not exist"):
        load_scenario(sc)


def test_shared_streams_serialise_two_threads():
    prog = [{"op": "aclop_Conv2D", "shape": [1], "stream": "s"}]
    sc = {"name": "p", "profiled_ops": OPS, "streams": ["s"],
          "threads": [{"name": "a", "program": prog}, {"name": "b", "program": prog}]}
    cfg = load_scenario(sc)
    assert [t.streams for t in cfg.threads] == [("s",), ("s",)]
    dev = run_scenario(sc, write=False).sim.recorder.records("device")
    kernels = sorted((s, e, st) for op, s, e, st in zip(dev["op"], dev["start"], dev["end"], dev["stream"])
                     if op == "Conv2D1")
    assert kernels[0][2] == kernels[1][2] and kernels[1][0] >= kernels[0][1]


def test_an_unknown_shared_stream_is_an_error():
    sc = {"name": "p", "profiled_ops": OPS, "streams": ["s"],
          "threads": [{"name": "a", "program": [{"op": "aclop_Conv2D", "shape": [1], "stream": "x"}]}]}
    with pytest.raises(ScenarioError, match="unknown stream 'x'"):
        load_scenario(sc)
