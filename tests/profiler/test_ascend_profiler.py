"""Ascend profiler output: the torch_npu text layout (and DB layout) written from the recorder.

A two-thread, two-stream program (Addmm, Add and an AI CPU Sigmoid per step, small block dims) is simulated
once per module; the tests check the files' structure against the recorder the files were derived from.
"""
from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import stat
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opsim.acl import Scalar, Tensor
from opsim.errors import InvalidArgumentError
from opsim.ops.aicpu_ops import aclnn_sigmoid_aicpu, aclnn_sigmoid_aicpu_get_workspace_size
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size
from opsim.ops.matmul import aclnn_addmm, aclnn_addmm_get_workspace_size
from opsim.runtime import acl_rt
from opsim.runtime.host_thread import run_op
from opsim.runtime.simulation import Simulation
from opsim.trace.ascend_profiler import (DEFAULT_EPOCH_US, KERNEL_DETAILS_HEADER, OP_STATISTIC_HEADER,
                                         STEP_TRACE_TIME_HEADER, build_profile, merge_intervals, timestamp_17,
                                         torch_op_name, us_str, write_profiler_output)

EPOCH_NS = DEFAULT_EPOCH_US * 1000
STEPS = 2
NON_KERNEL = {"HOST_FUNC", "MEMCPY_ASYNC", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE"}


def simulate(*, steps: int = STEPS, threads: int = 2, mark_steps: bool = True, env: dict | None = None,
             sizes=(64, 128, 256)) -> Simulation:
    sim = Simulation(soc="Ascend910B2", env=env)
    m, k, n = sizes

    def program(th):
        stream = sim.device.create_stream()
        bias, mat1, mat2, out = Tensor([n]), Tensor([m, k]), Tensor([k, n]), Tensor([m, n])
        summed, act = Tensor([m, n]), Tensor([m, n])
        for i in range(steps):
            if mark_steps:
                sim.recorder.instant(th.env.now, "step", th.name, {"step": i + 1, "phase": "begin"})
            calls = ((aclnn_addmm_get_workspace_size, aclnn_addmm, (bias, mat1, mat2, Scalar(1.0), Scalar(0.5), out),
                      "aclnnAddmm"),
                     (aclnn_add_get_workspace_size, aclnn_add, (out, out, Scalar(1.0), summed), "aclnnAdd"),
                     (aclnn_sigmoid_aicpu_get_workspace_size, aclnn_sigmoid_aicpu, (summed, act), "aclnnSigmoidAicpu"))
            for gws, run, args, api in calls:
                status, _ = yield from run_op(th, gws, run, args, stream, api=api)
                assert status == 0
            yield from th.call(acl_rt.synchronize_stream, stream)
            if mark_steps:
                sim.recorder.instant(th.env.now, "step", th.name, {"step": i + 1, "phase": "end"})

    for t in range(threads):
        sim.add_thread(program, f"t{t}")
    sim.run()
    return sim


def ns(t_us: float) -> int:
    return EPOCH_NS + round(t_us * 1000.0)


def kernel_rows(sim):
    dev = sim.recorder.records("device")
    cols = ("stream", "task_id", "op", "task_type", "block_dim", "start", "end", "corr")
    return [dict(zip(cols, r)) for r in zip(*(dev[c] for c in cols)) if r[3] not in NON_KERNEL]


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    return rows[0], [dict(zip(rows[0], r)) for r in rows[1:]]


@pytest.fixture(scope="module")
def sim():
    return simulate()


@pytest.fixture(scope="module")
def out(sim, tmp_path_factory):
    root = write_profiler_output(sim, str(tmp_path_factory.mktemp("prof")), name="run", db=True)
    return root


@pytest.fixture(scope="module")
def trace(out):
    with open(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
        return json.load(f)


def pid_of(trace, name):
    return next(e["pid"] for e in trace if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"] == name)


# ---- layout -----------------------------------------------------------------------------------------------

def test_layout_names_and_permissions(out, sim):
    assert os.path.basename(out) == "run_20231114221320000_ascend_pt"
    assert os.path.isfile(os.path.join(out, "profiler_info_0.json"))
    prof = [d for d in os.listdir(out) if d.startswith("PROF_")]
    assert len(prof) == 1 and re.fullmatch(r"PROF_\d{6}_\d{17}_\w+", prof[0])
    info_path = os.path.join(out, prof[0], "device_0", "info.json.0")
    with open(info_path) as f:
        info = json.load(f)["DeviceInfo"][0]
    assert (info["ai_core_num"], info["aiv_num"]) == (sim.soc.aicore_count, sim.soc.vector_core_count)
    assert info["aic_frequency"] == str(int(sim.soc.clock_mhz)) and info["id"] == 0
    names = sorted(os.listdir(os.path.join(out, "ASCEND_PROFILER_OUTPUT")))
    assert names == ["analysis.db", "ascend_pytorch_profiler_0.db", "kernel_details.csv", "memory_record.csv",
                     "npu_module_mem.csv", "op_statistic.csv", "operator_memory.csv", "step_trace_time.csv",
                     "trace_view.json"]
    for dirpath, dirs, files in os.walk(out):
        assert stat.S_IMODE(os.stat(dirpath).st_mode) == 0o750
        for f in files:
            assert stat.S_IMODE(os.stat(os.path.join(dirpath, f)).st_mode) == 0o640


def test_profiler_info_carries_rank_and_level(tmp_path, sim):
    root = write_profiler_output(sim, str(tmp_path), name="r3", rank=3)
    with open(os.path.join(root, "profiler_info_3.json")) as f:
        info = json.load(f)
    assert info["rank_id"] == 3 and info["config"]["experimental_config"]["_profiler_level"] == "Level1"


def test_timestamp_comes_from_epoch_not_wall_clock(tmp_path, sim):
    root = write_profiler_output(sim, str(tmp_path), name="x", epoch_us=1_736_413_971_558_972)
    assert os.path.basename(root) == "x_20250109091251558_ascend_pt"


@pytest.mark.parametrize("kwargs", [{"name": ""}, {"name": "a b"}, {"name": "x/y"}, {"name": "ok", "epoch_us": -1},
                                    {"name": "ok", "epoch_us": 1.5}, {"name": "ok", "rank": -2}])
def test_invalid_arguments_name_the_field(tmp_path, sim, kwargs):
    with pytest.raises(InvalidArgumentError) as exc:
        write_profiler_output(sim, str(tmp_path), **kwargs)
    field = "name" if "epoch_us" not in kwargs and "rank" not in kwargs else next(k for k in kwargs if k != "name")
    assert field in str(exc.value)


# ---- trace_view.json ----------------------------------------------------------------------------------------

def test_trace_is_flat_array_with_the_four_processes(trace):
    assert isinstance(trace, list)
    procs = {e["args"]["name"] for e in trace if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {"Python", "CANN", "Ascend Hardware", "Overlap Analysis"}
    for e in trace:
        if "ts" in e:
            assert re.fullmatch(r"\d+\.\d{3}", e["ts"]), e
        if "dur" in e:
            assert re.fullmatch(r"\d+\.\d{3}", e["dur"]), e


def test_device_slices_are_the_recorder_kernels_in_integer_ns(trace, sim):
    hw = pid_of(trace, "Ascend Hardware")
    slices = [e for e in trace if e["ph"] == "X" and e["pid"] == hw]
    expected = kernel_rows(sim)
    assert len(slices) == len(expected)
    by_key = {(e["tid"], e["args"]["Task Id"]): e for e in slices}
    for k in expected:
        e = by_key[(k["stream"], k["task_id"])]
        assert e["ts"] == us_str(ns(k["start"]))
        assert Decimal(e["ts"]) * 1000 == ns(k["start"])
        assert Decimal(e["dur"]) * 1000 == ns(k["end"]) - ns(k["start"])
        assert e["args"]["Task Type"] == k["task_type"]
        assert e["args"]["Stream Id"] == e["args"]["Physic Stream Id"] == e["tid"] == k["stream"]
        assert e["name"].endswith(f"_{k['op']}_{k['op']}")
    # stream-ordered frees (HOST_FUNC) are not device work and are not shown
    assert not any(e["args"]["Task Type"] == "HOST_FUNC" for e in slices)


def test_one_flow_per_kernel_matching_cpu_op_and_kernel_exactly(trace, sim):
    hw, py = pid_of(trace, "Ascend Hardware"), pid_of(trace, "Python")
    kernels = {(e["pid"], e["tid"], e["ts"]): e for e in trace if e["ph"] == "X" and e["pid"] == hw}
    ops = {(e["pid"], e["tid"], e["ts"]): e for e in trace
           if e["ph"] == "X" and e.get("cat") == "cpu_op" and not e["name"].startswith("ProfilerStep#")}
    starts = {e["id"]: e for e in trace if e.get("cat") == "async_npu" and e["ph"] == "s"}
    ends = {e["id"]: e for e in trace if e.get("cat") == "async_npu" and e["ph"] == "f"}
    assert set(starts) == set(ends) and len(starts) == len(kernels)
    host = sim.recorder.records("host")
    api_of = {c: op for p, op, c in zip(host["phase"], host["op"], host["corr"]) if p == "op_call"}
    for fid, f in ends.items():
        s = starts[fid]
        assert s["name"] == f["name"] == "torch_to_npu" and f["bp"] == "e"
        kernel = kernels[(f["pid"], f["tid"], f["ts"])]
        assert type(f["pid"]) is type(kernel["pid"]) and type(f["tid"]) is type(kernel["tid"])
        assert fid == f"{kernel['tid']}-{kernel['ts']}"
        op = ops[(py, s["tid"], s["ts"])]
        assert op["name"] == torch_op_name(api_of[kernel["args"]["connection_id"]])
        # the kernel's flow starts inside its op and inside no other op of that thread
        owners = [o for o in ops.values() if o["tid"] == s["tid"]
                  and Decimal(o["ts"]) <= Decimal(s["ts"]) <= Decimal(o["ts"]) + Decimal(o["dur"])]
        assert owners == [op]


def test_cpu_ops_have_call_stacks_and_do_not_touch(trace):
    ops = sorted((e for e in trace if e.get("cat") == "cpu_op" and not e["name"].startswith("ProfilerStep#")),
                 key=lambda e: (e["tid"], Decimal(e["ts"])))
    assert {o["name"] for o in ops} == {"aten::addmm", "aten::add", "aten::sigmoid_aicpu"}
    for a, b in zip(ops, ops[1:]):
        assert "Call stack" in a["args"]
        if a["tid"] == b["tid"]:
            assert Decimal(a["ts"]) + Decimal(a["dur"]) < Decimal(b["ts"])


def test_profiler_steps_per_thread_from_step_instants(trace, sim):
    steps = [e for e in trace if e.get("cat") == "cpu_op" and e["name"].startswith("ProfilerStep#")]
    assert sorted((e["tid"], e["name"]) for e in steps) == sorted(
        (th.thread_id, f"ProfilerStep#{n}") for th in sim.threads for n in range(1, STEPS + 1))


def test_whole_run_is_step_1_without_step_instants(tmp_path):
    sim = simulate(steps=2, threads=1, mark_steps=False)
    p = build_profile(sim)
    assert [w.step for w in p.steps] == [1] and {t.step for t in p.kernels} == {1}
    host = sim.recorder.records("host")
    assert p.steps[0].start_ns == ns(min(host["start"]))
    assert p.steps[0].end_ns == ns(max(s + d for s, d in zip(host["start"], host["dur"])))


def test_cann_spans_per_call(trace, sim):
    cann = pid_of(trace, "CANN")
    spans = [e for e in trace if e["ph"] == "X" and e["pid"] == cann]
    host = sim.recorder.records("host")
    calls = [(op, c) for p, op, c in zip(host["phase"], host["op"], host["corr"]) if p == "op_call"]
    for api, corr in calls:
        mine = [e["name"] for e in spans if e["args"]["connection_id"] == corr]
        assert mine.count(f"AscendCL@{api}GetWorkspaceSize") == 1 and mine.count(f"AscendCL@{api}") == 1
    launches = sum(1 for p in host["phase"] if p in ("launch", "Launch"))
    assert sum(e["name"] == "Node@launch" for e in spans) == launches
    syncs = sum(1 for p in host["phase"] if p == "stream sync")
    assert sum(e["name"] == "AscendCL@aclrtSynchronizeStream" for e in spans) == syncs
    # each Node@launch sits inside the AscendCL@aclnnXxx span of its call (phase 2)
    for e in spans:
        if e["name"] == "Node@launch":
            parent = [p for p in spans if p["args"]["connection_id"] == e["args"]["connection_id"]
                      and p["name"].startswith("AscendCL@aclnn") and not p["name"].endswith("GetWorkspaceSize")]
            assert Decimal(parent[0]["ts"]) <= Decimal(e["ts"])
            assert Decimal(e["ts"]) + Decimal(e["dur"]) <= Decimal(parent[0]["ts"]) + Decimal(parent[0]["dur"])


def test_overlap_is_union_and_gaps_of_device_busy_time(trace, sim):
    ov = pid_of(trace, "Overlap Analysis")
    comp = [(int(Decimal(e["ts"]) * 1000), int((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000))
            for e in trace if e["ph"] == "X" and e["pid"] == ov and e["name"] == "Computing"]
    free = [(int(Decimal(e["ts"]) * 1000), int((Decimal(e["ts"]) + Decimal(e["dur"])) * 1000))
            for e in trace if e["ph"] == "X" and e["pid"] == ov and e["name"] == "Free"]
    busy = sorted((ns(k["start"]), ns(k["end"])) for k in kernel_rows(sim))
    # brute-force union at nanosecond resolution over the (small) busy set
    covered = set()
    for s, e in busy:
        covered.update(range(s, e))
    assert sum(e - s for s, e in comp) == len(covered)
    assert comp[0][0] == busy[0][0] and comp[-1][1] == max(e for _, e in busy)
    assert free == [(a[1], b[0]) for a, b in zip(comp, comp[1:])]
    assert all(a[1] < b[0] for a, b in zip(comp, comp[1:]))


# ---- CSVs -------------------------------------------------------------------------------------------------

def test_kernel_details_rows_match_trace_and_recorder(out, trace, sim):
    header, rows = read_csv(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    assert tuple(header) == KERNEL_DETAILS_HEADER
    assert "Block Dim" in header and "Block Num" not in header
    hw = pid_of(trace, "Ascend Hardware")
    by_ts = {(e["tid"], e["ts"]): e for e in trace if e["ph"] == "X" and e["pid"] == hw}
    expected = kernel_rows(sim)
    assert len(rows) == len(expected)
    for r in rows:
        e = by_ts[(int(r["Stream ID"]), r["Start Time(us)"])]
        assert r["Name"] == e["name"] and r["Duration(us)"] == e["dur"]
        assert r["Accelerator Core"] == e["args"]["Task Type"] and int(r["Task ID"]) == e["args"]["Task Id"]
        assert r["OP State"] == "static" and r["Step Id"] in {str(n) for n in range(1, STEPS + 1)}
    for k in expected:
        r = next(r for r in rows if int(r["Stream ID"]) == k["stream"] and int(r["Task ID"]) == k["task_id"])
        assert (r["Type"], int(r["Block Dim"])) == (k["op"], k["block_dim"])
    # Wait Time: gap since the previous kernel (start order, any stream) ended, never negative
    ordered = sorted(rows, key=lambda r: (Decimal(r["Start Time(us)"]), int(r["Stream ID"]), int(r["Task ID"])))
    assert ordered == rows and rows[0]["Wait Time(us)"] == "0.000"
    for prev, r in zip(rows, rows[1:]):
        gap = Decimal(r["Start Time(us)"]) - Decimal(prev["Start Time(us)"]) - Decimal(prev["Duration(us)"])
        assert Decimal(r["Wait Time(us)"]) == max(gap, Decimal(0))


def test_pmu_columns_split_cube_vector_and_aicpu(out, sim):
    _, rows = read_csv(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    eff = sim.cost.params
    kinds = {r["Accelerator Core"] for r in rows}
    assert kinds == {"AI_CORE", "AI_VECTOR_CORE", "AI_CPU"}
    for r in rows:
        d = Decimal(r["Duration(us)"])
        if r["Accelerator Core"] == "AI_CPU":
            assert all(r[c] == "N/A" for c in header_pmu())
            continue
        side, other, pipe, key = (("aicore_time(us)", "aiv_time(us)", "aic_mac_time(us)", "aicore_efficiency")
                                  if r["Accelerator Core"] == "AI_CORE" else
                                  ("aiv_time(us)", "aicore_time(us)", "aiv_vec_time(us)", "vector_efficiency"))
        assert Decimal(r[side]) == d and Decimal(r[other]) == 0
        launch = min(d, Decimal(str(eff["aicore_launch_us"])))  # a fitted kernel may be shorter than it
        assert abs(Decimal(r[pipe]) - (d - launch) * Decimal(str(eff[key]))) <= Decimal("0.001")
        prefix = "aic" if side == "aicore_time(us)" else "aiv"
        assert Decimal(r[f"{prefix}_scalar_time(us)"]) == launch


def header_pmu():
    return KERNEL_DETAILS_HEADER[KERNEL_DETAILS_HEADER.index("aicore_time(us)"):]


def test_op_statistic_totals(out, sim):
    header, rows = read_csv(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "op_statistic.csv"))
    assert tuple(header) == OP_STATISTIC_HEADER
    groups: dict = {}
    for k in kernel_rows(sim):
        groups.setdefault((k["op"], k["task_type"]), []).append(ns(k["end"]) - ns(k["start"]))
    assert {(r["OP Type"], r["Core Type"]): (int(r["Count"]), r["Total Time(us)"]) for r in rows} == {
        key: (len(v), us_str(sum(v))) for key, v in groups.items()}
    assert [Decimal(r["Total Time(us)"]) for r in rows] == sorted((Decimal(r["Total Time(us)"]) for r in rows),
                                                                  reverse=True)


def test_step_trace_time_per_step(out, sim):
    header, rows = read_csv(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"))
    assert tuple(header) == STEP_TRACE_TIME_HEADER
    assert [r["Step"] for r in rows] == [str(n) for n in range(1, STEPS + 1)]
    p = build_profile(sim)
    for r in rows:
        mine = [(t.start_ns, t.end_ns) for t in p.kernels if t.step == int(r["Step"])]
        union = sum(e - s for s, e in merge_intervals(mine))
        assert Decimal(r["Computing"]) * 1000 == union
        assert Decimal(r["Stage"]) * 1000 == max(e for _, e in mine) - min(s for s, _ in mine)
        assert Decimal(r["Computing"]) + Decimal(r["Free"]) == Decimal(r["Stage"])
        assert Decimal(r["Preparing"]) >= 0 and r["Device_id"] == "0"


def test_every_kernel_launch_fills_quoted_shapes(tmp_path):
    """The framework records each launch's tensors (first run, cache replay, AI CPU); rows get quoted shapes."""
    sim = simulate(steps=2, threads=1)
    root = write_profiler_output(sim, str(tmp_path), name="shapes")
    path = os.path.join(root, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv")
    _, rows = read_csv(path)
    by_type = {}
    for r in rows:
        by_type.setdefault(r["Type"], []).append(r)
    # Addmm = MatMulV2 + 2 x Muls + Add, then Add and Sigmoid: every launch of both steps (step 2 replays)
    assert [r["Input Shapes"] for r in by_type["MatMulV2"]] == ['"64,128;128,256"'] * 2
    assert [r["Output Shapes"] for r in by_type["MatMulV2"]] == ['"64,256"'] * 2
    assert {r["Input Shapes"] for r in by_type["Muls"]} == {'"64,256"', '"256"'}
    assert by_type["Sigmoid"][0]["Input Shapes"] == '"64,256"' and by_type["Sigmoid"][0]["Accelerator Core"] \
        == "AI_CPU"
    assert all(r["Input Data Types"].split(";")[0] == "FLOAT" and r["Input Formats"].startswith("ND")
               for r in rows)
    with open(path) as f:
        assert '"""64,128;128,256"""' in f.read()


def test_tensor_info_instants_add_to_recorded_launches(tmp_path):
    sim = simulate(steps=1, threads=1)
    sim.recorder.tensor_infos.clear()  # only the instant describes the first AI Core kernel now
    dev = sim.recorder.records("device")
    first = next(i for i, tt in enumerate(dev["task_type"]) if tt == "AI_CORE")
    sim.recorder.instant(dev["queued"][first], "tensor_info", "t0", {
        "corr": dev["corr"][first], "op": dev["op"][first], "input_shapes": "64,128;128,256",
        "input_data_types": "FLOAT;FLOAT", "input_formats": "ND;ND", "output_shapes": "64,256",
        "output_data_types": "FLOAT", "output_formats": "ND"})
    root = write_profiler_output(sim, str(tmp_path), name="shapes")
    _, rows = read_csv(os.path.join(root, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    row = next(r for r in rows if r["Type"] == dev["op"][first])
    assert row["Input Shapes"] == '"64,128;128,256"' and row["Output Shapes"] == '"64,256"'
    assert all(r["Input Shapes"] == "" for r in rows if r is not row)


# ---- DB layout ---------------------------------------------------------------------------------------------

def test_db_tables_agree_with_text_files(out, trace):
    db = sqlite3.connect(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "ascend_pytorch_profiler_0.db"))
    rows = db.execute("""
        SELECT n.value, t.startNs, t.endNs, t.streamId, t.taskId, tt.value, c.blockDim, o.value
        FROM COMPUTE_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId
        JOIN STRING_IDS n ON n.id = c.name JOIN STRING_IDS tt ON tt.id = c.taskType
        JOIN STRING_IDS o ON o.id = c.opState""").fetchall()
    _, csv_rows = read_csv(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    assert len(rows) == len(csv_rows)
    by_key = {(int(r["Stream ID"]), int(r["Task ID"])): r for r in csv_rows}
    for name, start, end, stream, task_id, ttype, bd, state in rows:
        r = by_key[(stream, task_id)]
        assert type(start) is int and Decimal(r["Start Time(us)"]) * 1000 == start
        assert Decimal(r["Duration(us)"]) * 1000 == end - start
        assert (name, ttype, str(bd), state) == (r["Name"], r["Accelerator Core"], r["Block Dim"], "static")
    # cube kernels carry aic_total_time (ns), vector kernels aiv_vec_time, AI CPU kernels no PMU rows
    pmu = dict(((g, n), v) for g, n, v in db.execute(
        "SELECT p.globalTaskId, s.value, p.value FROM TASK_PMU_INFO p JOIN STRING_IDS s ON s.id = p.name"))
    for gid, ttype, dur in db.execute("""SELECT c.globalTaskId, tt.value, t.endNs - t.startNs FROM COMPUTE_TASK_INFO c
            JOIN TASK t ON t.globalTaskId = c.globalTaskId JOIN STRING_IDS tt ON tt.id = c.taskType"""):
        if ttype == "AI_CORE":
            assert pmu[(gid, "aic_total_time")] == dur and (gid, "aiv_total_time") not in pmu
        elif ttype == "AI_VECTOR_CORE":
            assert pmu[(gid, "aiv_total_time")] == dur and (gid, "aic_total_time") not in pmu
        else:
            assert not any(g == gid for g, _ in pmu)
    # torch ops reach their kernels through CONNECTION_IDS
    linked = db.execute("""SELECT COUNT(*) FROM PYTORCH_API a JOIN CONNECTION_IDS ci ON ci.id = a.connectionId
                           JOIN TASK t ON t.connectionId = ci.connectionId""").fetchone()[0]
    assert linked == len(rows)
    api_names = {r[0] for r in db.execute("""SELECT e.name || '@' || s.value FROM CANN_API c
            JOIN STRING_IDS s ON s.id = c.name JOIN ENUM_API_TYPE e ON e.id = c.type""")}
    assert {"acl@aclnnAddmm", "acl@aclnnAddmmGetWorkspaceSize", "node@launch"} <= api_names
    steps = db.execute("SELECT id FROM STEP_TIME ORDER BY id").fetchall()
    assert [s for (s,) in steps] == list(range(1, STEPS + 1))
    _, step_rows = read_csv(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "step_trace_time.csv"))
    an = sqlite3.connect(os.path.join(out, "ASCEND_PROFILER_OUTPUT", "analysis.db"))
    got = an.execute("SELECT step, computing, free, stage, preparing FROM StepTraceTime ORDER BY step").fetchall()
    assert got == [(r["Step"], float(r["Computing"]), float(r["Free"]), float(r["Stage"]), float(r["Preparing"]))
                   for r in step_rows]


# ---- determinism ---------------------------------------------------------------------------------------------

def _tree(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            with open(os.path.join(dirpath, f), "rb") as fh:
                out[os.path.relpath(os.path.join(dirpath, f), root)] = fh.read()
    return out


def test_same_run_gives_byte_identical_directories(tmp_path):
    a = write_profiler_output(simulate(steps=1), str(tmp_path / "a"), name="same", db=True)
    b = write_profiler_output(simulate(steps=1), str(tmp_path / "b"), name="same", db=True)
    ta, tb = _tree(a), _tree(b)
    assert ta.keys() == tb.keys() and len(ta) == 11
    assert ta == tb


def test_rewriting_replaces_files_in_place(tmp_path, sim):
    a = write_profiler_output(sim, str(tmp_path), name="again", db=True)
    first = _tree(a)
    b = write_profiler_output(sim, str(tmp_path), name="again", db=True)
    assert a == b and _tree(b) == first


# ---- helpers ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("api, name", [("aclnnAddmm", "aten::addmm"), ("aclnnAdd", "aten::add"),
                                       ("aclnnInplaceAdd", "aten::add_"), ("aclnnIndexPutImpl", "aten::index_put_impl"),
                                       ("aclnnMatmul", "aten::matmul"), ("aclnnSigmoidAicpu", "aten::sigmoid_aicpu"),
                                       ("aclnnNLLLoss", "aten::nll_loss"), ("custom_op", "custom_op")])
def test_torch_op_name(api, name):
    assert torch_op_name(api) == name


@given(st.integers(min_value=0, max_value=10**20))
def test_us_str_is_exact(ns_value):
    text = us_str(ns_value)
    assert re.fullmatch(r"\d+\.\d{3}", text) and Decimal(text) * 1000 == ns_value


@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 50)).map(lambda t: (t[0], t[0] + t[1])), max_size=30))
def test_merge_intervals_is_the_union(intervals):
    merged = merge_intervals(intervals)
    covered = {x for s, e in intervals for x in range(s, e)}
    assert {x for s, e in merged for x in range(s, e)} == covered
    assert all(a[1] < b[0] for a, b in zip(merged, merged[1:]))


@given(st.integers(min_value=0, max_value=4_000_000_000_000_000))
def test_timestamp_17_is_utc_millis(epoch_us):
    import datetime as dt
    t = dt.datetime.fromtimestamp(epoch_us // 1_000_000, dt.timezone.utc)
    assert timestamp_17(epoch_us) == t.strftime("%Y%m%d%H%M%S") + f"{epoch_us % 1_000_000 // 1000:03d}"


def test_copies_and_events_on_the_timeline_but_not_as_kernels(tmp_path):
    from opsim.opdev import rt
    from opsim.opdev.thread_local import current
    sim = Simulation(soc="Ascend910B2")

    def program(th):
        s0, s1 = sim.device.create_stream(), sim.device.create_stream()
        ev = sim.device.create_event()
        yield from th.call(lambda: rt.submit_memcpy(current(), s0, 1 << 20, "H2D"))
        yield from th.call(acl_rt.record_event, ev, s0)
        yield from th.call(acl_rt.stream_wait_event, s1, ev)
        x, y = Tensor([64, 256]), Tensor([64, 256])
        status, _ = yield from run_op(th, aclnn_add_get_workspace_size, aclnn_add, (x, x, Scalar(1.0), y), s1,
                                      api="aclnnAdd")
        assert status == 0
        yield from th.call(acl_rt.synchronize_device)

    sim.add_thread(program, "main")
    sim.run()
    root = write_profiler_output(sim, str(tmp_path), name="copies")
    with open(os.path.join(root, "ASCEND_PROFILER_OUTPUT", "trace_view.json")) as f:
        trace = json.load(f)
    hw, ov, cann = pid_of(trace, "Ascend Hardware"), pid_of(trace, "Overlap Analysis"), pid_of(trace, "CANN")
    types = sorted(e["args"]["Task Type"] for e in trace if e["ph"] == "X" and e["pid"] == hw)
    assert types == ["AI_VECTOR_CORE", "EVENT_RECORD_SQE", "EVENT_WAIT_SQE", "MEMCPY_ASYNC"]
    _, rows = read_csv(os.path.join(root, "ASCEND_PROFILER_OUTPUT", "kernel_details.csv"))
    assert [r["Accelerator Core"] for r in rows] == ["AI_VECTOR_CORE"]
    # the copy keeps the device busy; the event wait does not
    dev = sim.recorder.records("device")
    busy = [(ns(s), ns(e)) for tt, s, e in zip(dev["task_type"], dev["start"], dev["end"])
            if tt in ("MEMCPY_ASYNC", "AI_VECTOR_CORE")]
    comp = sum(Decimal(e["dur"]) * 1000 for e in trace if e["pid"] == ov and e["name"] == "Computing")
    assert comp == sum(e - s for s, e in merge_intervals(busy))
    # only the kernel launched by an ACLNN call has a flow; runtime calls appear as AscendCL spans
    assert sum(1 for e in trace if e.get("cat") == "async_npu" and e["ph"] == "s") == 1
    names = {e["name"] for e in trace if e["ph"] == "X" and e["pid"] == cann}
    assert {"AscendCL@aclrtRecordEvent", "AscendCL@aclrtStreamWaitEvent", "AscendCL@aclrtSynchronizeStream"} <= names


def test_a_run_without_trace_records_is_refused(tmp_path):
    sim = Simulation(soc="Ascend910B2", trace=False)
    sim.add_thread(lambda th: (yield from th.call(lambda: None)), "idle")
    sim.run()
    with pytest.raises(InvalidArgumentError, match="trace=True"):
        write_profiler_output(sim, str(tmp_path), name="empty")
