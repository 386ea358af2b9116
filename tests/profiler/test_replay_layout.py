"""A replay's profiler output keeps its profile's layout: streams named ``stream_<N>`` (as `opsim import` names
them) keep id N, and profiled kernels keep their recorded Name, Type and Accelerator Core (so msprof-analyze
files a vector kernel under Vector, not Cube)."""
from __future__ import annotations

import csv
import json

import pytest

from opsim.errors import InvalidArgumentError
from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_build import _checked_stream_ids
from opsim.trace.ascend_profiler import profile_stream_ids, profiled_kernel_types

SCENARIO = {
    "name": "replay_layout",
    "streams": ["stream_3"],
    "profiled_ops": {"aclnnMm": {"api": "aclnnMm", "variants": [{
        "calls": 1, "shapes": [[4, 4], [4, 4]], "dtype": "float",
        "kernels": [
            {"name": "aclnnMm_MatMulCommon_MemSet", "type": "MemSet", "task_type": "AI_VECTOR_CORE", "block_dim": 8,
             "duration_us": 5.0},
            {"name": "aclnnMm_MatMulCommon_MatMulV2", "type": "MatMulV2", "task_type": "AI_CORE", "block_dim": 8,
             "duration_us": 9.0}]}]}},
    "threads": [{"name": "main", "program": [{"loop": {"count": 2, "body": [
        {"op": "aclnnMm", "shapes": [[4, 4], [4, 4]], "dtype": "float"}]}}]}],
}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("replay")
    run_scenario(SCENARIO, out_dir=d, profiler_output="text")
    return next(d.glob("*_ascend_pt")) / "ASCEND_PROFILER_OUTPUT"


def test_kernels_keep_their_recorded_name_type_core_and_stream(out):
    with open(out / "kernel_details.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    got = {(r["Name"], r["Type"], r["Accelerator Core"], r["Stream ID"]) for r in rows}
    assert got == {("aclnnMm_MatMulCommon_MemSet", "MemSet", "AI_VECTOR_CORE", "3"),
                   ("aclnnMm_MatMulCommon_MatMulV2", "MatMulV2", "AI_CORE", "3")}
    for r in rows:  # the PMU side follows the core: msprof-analyze's Vector / Cube split reads these
        vector = r["Accelerator Core"] == "AI_VECTOR_CORE"
        assert (float(r["aiv_vec_time(us)"]) > 0) == vector and (float(r["aicore_time(us)"]) > 0) == (not vector)
    events = json.loads((out / "trace_view.json").read_text())
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name" and e["pid"] == 300}
    assert names == {"Stream 3"}


class _St:
    def __init__(self, i):
        self.stream_id = i


def test_profile_stream_ids_keep_ids_apart():
    assert profile_stream_ids({"stream_7": _St(0), "s1": _St(1)}) == {0: 7}
    assert profile_stream_ids({"stream_1": _St(0), "s1": _St(1)}) == {}  # would give two streams id 1
    assert profile_stream_ids({"stream_0": _St(0)}) == {}
    assert profile_stream_ids({"stream_99999999999": _St(0)}) == {}  # not an id a profile has


def test_checked_stream_ids_and_kernel_types_reject_bad_input():
    for bad in ({0: -1}, {0: True}, {"0": 1}, {0: 2**31}, {0: 1, 1: 1}):
        with pytest.raises(InvalidArgumentError):
            _checked_stream_ids(bad)
    assert profiled_kernel_types(SCENARIO["profiled_ops"]) == {"aclnnMm_MatMulCommon_MemSet": "MemSet",
                                                                 "aclnnMm_MatMulCommon_MatMulV2": "MatMulV2"}
    assert profiled_kernel_types({"x": {"variants": [{"kernels": [{"name": "K"}, {"name": 3}, "junk"]}, 5]}}) == \
        {"K": "K"}
    assert profiled_kernel_types(None) == {} and profiled_kernel_types([1]) == {}
