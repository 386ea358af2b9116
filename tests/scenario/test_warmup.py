"""A thread's `warmup` steps run with the profiler stopped (opsim.scenario.warmup): the profiler outputs leave
them out, every thread's program starts when all threads have warmed up, opsim's own trace keeps them."""
from __future__ import annotations

import csv
import json
from collections import Counter

import pytest
import yaml

from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario
from opsim.scenario.runner import run_scenario
from opsim.trace.profiler_window import PROFILER_START

SCENARIO = {
    "name": "warm", "seed": 3,
    "threads": [
        {"name": "main", "cache_mode": "pta",
         "warmup": [{"op": "Add", "shape": [64, 64]}, {"op": "Mul", "shape": [64, 64]}, {"sleep": 50}],
         "program": [{"loop": {"count": 3, "body": [{"op": "Add", "shape": [64, 64]}, {"op": "Relu",
                                                                                     "shape": [64, 64]}]}}]},
        {"name": "side", "program": [{"op": "Mul", "shape": [32]}]},
    ],
}


def _profile(out):
    (tv,) = out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json")
    events = json.loads(tv.read_text())
    calls = Counter(e["name"][len("AscendCL@"):] for e in events
                    if e.get("name", "").startswith("AscendCL@aclnn") and not e["name"].endswith("WorkspaceSize"))
    rows = list(csv.DictReader((tv.parent / "kernel_details.csv").open()))
    return events, calls, rows


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    out = tmp_path_factory.mktemp("warm")
    return run_scenario(SCENARIO, out_dir=out, profiler_output="text"), out


def test_profiler_outputs_have_only_the_programs_calls(warm):
    res, out = warm
    _, calls, rows = _profile(out)
    assert calls == {"aclnnAdd": 3, "aclnnRelu": 3, "aclnnMul": 1}
    # both threads start at the profiler's start, with main's first step: no kernel outside a step
    assert len(rows) == 7 and all(r["Step Id"] for r in rows)
    assert res.summary["op_calls"] == 9  # the run itself made the warm-up calls


def test_opsim_trace_keeps_the_warm_up(warm):
    res, out = warm
    host = res.sim.recorder.records("host")
    ops = Counter(op for phase, op in zip(host["phase"], host["op"]) if phase == "op_call")
    assert ops["aclnnAdd"] == 4 and ops["aclnnMul"] == 2
    names = [e["name"] for e in json.loads((out / "trace.json").read_text())["traceEvents"]]
    assert names.count(PROFILER_START) == 1


def test_every_program_starts_when_all_threads_warmed_up(warm):
    """The side thread has no warm-up: it waits for main's; main's warm-up ends with a device sync."""
    res, _ = warm
    rec = res.sim.recorder
    inst = rec.records("instant")
    (t0,) = [t for t, n in zip(inst["time"], inst["name"]) if n == PROFILER_START]
    host = rec.records("host")
    side = [s for th, ph, s in zip(host["thread"], host["phase"], host["start"]) if th == "side" and ph == "op_call"]
    assert side and min(side) >= t0 > 50
    dev = rec.records("device")
    warm_tasks = [e for s, e in zip(dev["start"], dev["end"]) if s < t0]
    assert warm_tasks and max(warm_tasks) <= t0  # nothing of the warm-up runs into the window


def test_memory_record_starts_with_the_memory_held_at_the_start(warm):
    _, out = warm
    (mem,) = out.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/memory_record.csv")
    first = next(csv.DictReader(mem.open()))
    allocated = next(v for k, v in first.items() if "Allocated" in k)
    assert float(allocated) > 0.016  # the warm-up's 64x64 tensors (16 KiB each) are still held


def test_same_outputs_without_the_fast_path(tmp_path):
    a = run_scenario(SCENARIO, out_dir=tmp_path / "a", profiler_output="text")
    b = run_scenario(SCENARIO, out_dir=tmp_path / "b", profiler_output="text", fast_path=False)
    assert a.ok and b.ok
    for name in ("trace.json", "summary.json"):
        pa, pb = (tmp_path / d / name for d in "ab")
        if name == "summary.json":
            ja, jb = json.loads(pa.read_text()), json.loads(pb.read_text())
            ja.pop("wall", None), jb.pop("wall", None)
            ja.get("run", {}).pop("fast_path", None), jb.get("run", {}).pop("fast_path", None)
            assert ja == jb
        else:
            assert pa.read_bytes() == pb.read_bytes()
    (ta,), (tb,) = ((tmp_path / d).glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv") for d in "ab")
    assert ta.read_bytes() == tb.read_bytes()


def test_a_thread_stopped_in_its_warm_up_lets_the_others_run(tmp_path):
    """A failed warm-up call (out of memory, `on_error: stop`) stops its thread; the others still start."""
    sc = json.loads(json.dumps(SCENARIO))
    sc["soc_overrides"] = {"hbm_bytes": 1 << 20}
    sc["threads"][0]["warmup"].insert(0, {"op": "Add", "shape": [1024, 1024]})  # 4 MiB: does not fit
    res = run_scenario(sc, out_dir=tmp_path / "o", profiler_output="text")
    assert not res.ok and res.summary["errors"]
    _, calls, _ = _profile(tmp_path / "o")
    assert calls == {"aclnnMul": 1}


def test_a_job_starts_its_profiler_once_for_every_rank(tmp_path):
    """Two ranks, only rank 1 warms up: both ranks' profilers start at the same instant, after it."""
    sc = yaml.safe_load(open("scenarios/data_parallel.yaml"))
    sc["cluster"]["size"] = 2
    sc["cluster"]["ranks_per_server"] = 2
    sc["threads"][0]["program"][0]["loop"]["count"] = 1
    warm = json.loads(json.dumps(sc["threads"]))
    warm[0]["warmup"] = [{"op": "Relu", "stream": "compute", "shape": [4096, 4096], "dtype": "float16"}]
    sc["ranks"] = [{}, {"threads": warm}]
    res = run_scenario(sc, write=False)
    starts = []
    for r in res.ranks:
        inst = r.sim.recorder.records("instant")
        starts += [t for t, n in zip(inst["time"], inst["name"]) if n == PROFILER_START]
    assert len(starts) == 2 and starts[0] == starts[1] > 0


def test_no_warm_up_no_profiler_start(tmp_path):
    sc = json.loads(json.dumps(SCENARIO))
    del sc["threads"][0]["warmup"]
    res = run_scenario(sc, write=False)
    assert PROFILER_START not in res.sim.recorder.records("instant")["name"]


@pytest.mark.parametrize("warmup, where", [
    ([{"op": "Nope", "shape": [1]}], "threads[0].warmup[0].op"),
    ({"op": "Add"}, "threads[0].warmup"),
    ([{"loop": {"count": 10 ** 12, "body": [{"op": "Add", "shape": [4]}]}}], "threads[0].warmup[0].loop.count"),
])
def test_a_bad_warm_up_names_its_place(warmup, where):
    sc = json.loads(json.dumps(SCENARIO))
    sc["threads"][0]["warmup"] = warmup
    with pytest.raises(ScenarioError) as exc:
        load_scenario(sc)
    assert where in str(exc.value)
