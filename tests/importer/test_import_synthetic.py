"""opsim import on synthetic traces: the edge cases a real profile may show."""
from __future__ import annotations

import pytest

from opsim.cli import main
from opsim.errors import ProfileFormatError
from opsim.importer import import_profile, write_import
from opsim.scenario.loader import load_scenario



def test_no_task_queue_calls_stay_on_their_thread(trace, tmp_path, op_steps):
    t = trace.call(7, "aclnnFoo", 1000.0)
    t = trace.call(7, "aclnnFoo", t + 50.0, phase1=False)
    trace.call(8, "aclnnBar", 1100.0)
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    sc = res.scenario
    assert sc["env"]["TASK_QUEUE_ENABLE"] == "0" and "task_queue_thread" not in sc
    names = {th["name"]: [s["op"] for s in op_steps(th["program"])] for th in sc["threads"]}
    assert names == {"thread_7": ["aclnnFoo", "aclnnFoo"], "thread_8": ["aclnnBar"]}
    # a hit without phase 1 is PTA: the threads run torch_npu's path
    assert all(th["cache_mode"] == "pta" for th in sc["threads"])
    assert res.report.figures["phase1"] == 2
    # the second call is a hit on the first call's key: same variant, no warm-up
    foo = [s for s in op_steps(sc["threads"][0]["program"])]
    assert [s.get("attrs", {}).get("variant", 0) for s in foo] == [0, 0]
    assert res.report.figures["warmup_calls"] == 0


def test_task_queue_maps_the_consumer_and_the_issuing_thread(trace, tmp_path):
    t = trace.call(7, "aclnnFoo", 1000.0, queue_tid=99)
    trace.call(7, "aclnnFoo", t + 100.0, queue_tid=99, phase1=False)
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    sc = res.scenario
    assert sc["env"]["TASK_QUEUE_ENABLE"] == "1" and sc["task_queue_thread"] == "thread_99"
    assert [th["name"] for th in sc["threads"]] == ["thread_7"]
    entry = sc["profiled_ops"]["aclnnFoo"]
    assert entry["host_us"] == {"phase1": 20.0, "phase2": 10.0}
    assert entry["variants"][0]["kernels"][0]["duration_us"] == 5.0


def test_hit_without_a_prior_miss_gets_a_warmup_call(trace, tmp_path):
    trace.call(7, "aclnnFoo", 1000.0, phase1=False)
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    thread = res.scenario["threads"][0]
    assert [s["op"] for s in thread["warmup"]] == ["aclnnFoo"]  # run with the profiler stopped
    assert not any("sync_device" in s for s in thread["program"])
    assert res.report.figures["warmup_calls"] == 1


def test_no_flows_replays_every_kernel_as_a_recorded_task(trace, tmp_path):
    trace.call(7, "aclnnFoo", 1000.0, kernels=((5.0, 3), (2.0, 3)), flows=False)
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    assert res.report.warnings == {}
    assert res.report.notes["device task without a launch link, replayed as a recorded task"] == 2
    assert res.scenario["profiled_ops"]["aclnnFoo"]["variants"][0]["kernels"] == []
    device = next(t for t in res.scenario["threads"] if t["name"] == "device_replay")["program"]
    assert [s["task"]["duration_us"] for s in device if "task" in s] == [5.0, 2.0]


def test_multiple_streams_become_shared_streams(trace, tmp_path, op_steps):
    trace.stream(5)
    trace.call(7, "aclnnFoo", 1000.0, kernels=((5.0, 3),))
    trace.call(7, "aclnnBar", 1200.0, kernels=((5.0, 5),))
    out = write_import(import_profile(trace.write(tmp_path / "trace_view.json")), tmp_path / "s.yaml")
    sc = out.scenario
    assert sc["streams"] == ["stream_3", "stream_5"]
    bar = [s for s in op_steps(sc["threads"][0]["program"]) if s["op"] == "aclnnBar"][0]
    assert bar["stream"] == "stream_5"
    cfg = load_scenario(out.scenario_path)
    assert cfg.shared_streams == ("stream_3", "stream_5")


def test_unknown_events_are_counted(trace, tmp_path):
    trace.call(7, "aclnnFoo", 1000.0)
    trace.x("AscendCL@aclSomethingNew", 2, 7, 1500.0, 4.0)
    trace.x("AscendCL@aclnnBarGetWorkspaceSize", 2, 7, 1600.0, 4.0)  # phase 1 with no call after it
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    assert res.report.warnings["unknown AscendCL event kept as host time between calls"] == 1
    assert res.report.warnings["GetWorkspaceSize not followed by its call (not replayed)"] == 1


def test_sleeps_are_the_host_gaps(trace, tmp_path):
    trace.x("ProfilerStep#1", 1, 7, 900.0, 2000.0)
    t = trace.call(7, "aclnnFoo", 1000.0)
    trace.call(7, "aclnnFoo", t + 250.0)
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    body = res.scenario["threads"][0]["program"][0]["loop"]["body"]
    assert body[0] == {"sleep": 100.0}
    assert body[2] == {"sleep": 250.0}


def test_missing_and_truncated_input_exit_2(tmp_path, trace, capsys):
    assert main(["import", str(tmp_path / "nope"), "-o", str(tmp_path / "s.yaml")]) == 2
    assert "nope: no such file" in capsys.readouterr().err
    path = trace.write(tmp_path / "trace_view.json")
    path.write_text(path.read_text()[:200])
    assert main(["import", str(path), "-o", str(tmp_path / "s.yaml")]) == 2
    assert "truncated" in capsys.readouterr().err
    with pytest.raises(ProfileFormatError):
        import_profile(path)


def test_a_trace_without_calls_is_an_error(trace, tmp_path):
    trace.x("AscendCL@aclrtSynchronizeDevice", 2, 7, 10.0, 4.0)
    with pytest.raises(ProfileFormatError, match="no ACLNN or aclop call"):
        import_profile(trace.write(tmp_path / "trace_view.json"))


KD_HEADER = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
             "Wait Time(us),Block Dim,Mix Block Dim,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
             "Output Data Types,Output Formats\n")


def _profile_dir(trace, tmp_path, rows):
    out = tmp_path / "run_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    trace.write(out / "trace_view.json")
    (out / "kernel_details.csv").write_text(KD_HEADER + "".join(rows), encoding="utf-8")
    return tmp_path / "run_ascend_pt"


def test_kernel_details_give_shapes_dtypes_cores_and_block_dims(trace, tmp_path, op_steps):
    trace.call(7, "aclnnFoo", 1000.0)  # its kernel starts at 1000 + 22 + 20 us
    rows = ['1,4294967295,1,3,aclnnFoo_K0,Mul,dynamic,AI_VECTOR_CORE,"1042.000\t",5.0,0,8,0,'
            '"""64,128;64,128""",DT_FLOAT16;DT_FLOAT16,ND;ND,"""64,128""",DT_FLOAT16,ND\n',
            '1,4294967295,2,3,Unrelated,Add,dynamic,AI_CORE,"9999.000\t",5.0,0,1,0,'
            '"""4""",FLOAT,ND,"""4""",FLOAT,ND\n']
    res = import_profile(_profile_dir(trace, tmp_path, rows))
    variant = res.scenario["profiled_ops"]["aclnnFoo"]["variants"][0]
    assert variant["shapes"] == [[64, 128], [64, 128]] and variant["dtype"] == "float16"
    # `work`: the row's flops, bytes moved and element size as the calibration counts them (for `repredict`)
    assert variant["kernels"] == [{"name": "aclnnFoo_K0", "type": "Mul", "task_type": "AI_VECTOR_CORE",
                                   "block_dim": 8, "duration_us": 5.0,
                                   "work": {"flops": 16384.0, "bytes": 49152.0, "itemsize": 2.0}}]
    step = next(op_steps(res.scenario["threads"][0]["program"]))
    assert step["shapes"] == [[64, 128], [64, 128]] and step["dtype"] == "float16"
    assert res.report.figures["kernel_details_joined"] == 1
    assert res.report.warnings == {"kernel_details.csv row matching no replayed kernel (stream, task id and start time)": 1}
    # the calibration of the same profile is written next to the scenario and named by it
    out = write_import(res, tmp_path / "out" / "s.yaml")
    assert out.scenario["calibration"] == "s.calibration.yaml" and out.calibration_path.exists()
    assert load_scenario(out.scenario_path).calibration == str(out.calibration_path)


def _device_time(scenario, overrides=None):
    from opsim.scenario.runner import run_scenario
    rec = run_scenario(scenario, write=False, overrides=overrides).sim.recorder.records("device")
    return [(op, round(e - s, 6)) for op, s, e in zip(rec["op"], rec["start"], rec["end"])
            if op.startswith("aclnn")]


def test_recorded_durations_replay_and_a_shape_what_if_asks_the_predictor(trace, tmp_path, op_steps):
    trace.call(7, "aclnnFoo", 1000.0)
    rows = ['1,4294967295,1,3,aclnnFoo_K0,Mul,dynamic,AI_VECTOR_CORE,"1042.000\t",5.0,0,8,0,'
            '"""64,128;64,128""",DT_FLOAT16;DT_FLOAT16,ND;ND,"""64,128""",DT_FLOAT16,ND\n']
    sc = import_profile(_profile_dir(trace, tmp_path, rows)).scenario
    assert _device_time(sc) == [("aclnnFoo_K0", 5.0)]
    program = sc["threads"][0]["program"]
    path = f"threads.0.program.{program.index(next(op_steps(program)))}.shapes"
    bigger = _device_time(sc, {path: [[4096, 4096], [4096, 4096]]})
    from opsim.device.cost import CostModel
    from opsim.device.soc import get_soc
    nbytes = 3 * 4096 * 4096 * 2
    expected = CostModel(get_soc("Ascend910B2")).kernel("Mul", "AI_VECTOR_CORE", 4096.0 * 4096, float(nbytes), 8)
    assert bigger == [("aclnnFoo_K0", pytest.approx(expected))] and expected != 5.0


def test_a_kernel_of_unknown_type_scales_with_the_element_count():
    from opsim.acl.tensor import Tensor
    from opsim.ops.profiled import _tiling
    recorded = _tiling([Tensor([2, 2])], [Tensor([2, 2])], [2.0, 1, "AI_CORE", 4, 0, ""])
    assert recorded.duration == 2.0
    four_times = _tiling([Tensor([4, 4])], [Tensor([4, 4])], [2.0, 1, "AI_CORE", 4, 0, ""])
    assert four_times.duration == pytest.approx(8.0)


def test_kernels_without_launch_flows_follow_torch_to_npu_flows(trace, tmp_path):
    trace.call(7, "aclnnFoo", 1000.0, flows=False)  # phase 1 at 1000, its kernel at 1042
    trace.call(7, "aclnnBar", 1100.0, flows=False)  # phase 1 at 1100, its kernel at 1142
    for fid, (start, kernel) in enumerate(((1001.0, 1042.0), (1100.0, 1142.0))):
        trace.events.append({"ph": "s", "cat": "async_npu", "name": "torch_to_npu", "id": f"t{fid}", "pid": 1,
                             "tid": 7, "ts": f"{start:.3f}"})
        trace.events.append({"ph": "f", "cat": "async_npu", "name": "torch_to_npu", "id": f"t{fid}", "bp": "e",
                             "pid": 3, "tid": 3, "ts": f"{kernel:.3f}"})
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    ops = res.scenario["profiled_ops"]
    assert [k["name"] for k in ops["aclnnFoo"]["variants"][0]["kernels"]] == ["aclnnFoo_K0"]
    assert [k["name"] for k in ops["aclnnBar"]["variants"][0]["kernels"]] == ["aclnnBar_K0"]
    assert res.report.warnings == {}


def test_without_pta_calls_with_the_same_launch_list_share_a_variant(trace, tmp_path, op_steps):
    t = trace.call(7, "aclnnFoo", 1000.0)
    t = trace.call(7, "aclnnFoo", t + 50.0)
    trace.call(7, "aclnnFoo", t + 50.0, kernels=((50.0, 3),))  # 10x longer: another shape
    res = import_profile(trace.write(tmp_path / "trace_view.json"))
    assert "cache_mode" not in res.scenario["threads"][0]
    variants = [s.get("attrs", {}).get("variant", 0) for s in op_steps(res.scenario["threads"][0]["program"])]
    assert variants == [0, 0, 1]
