"""The DirectInvoke example producers end to end in a simulation: numerics against numpy, the two dispatches of
aclnnAddRmsNorm on the caller's stream in the trace, the planned workspace, repeat runs, the stateless op."""
from __future__ import annotations

import numpy as np
import pytest

from opsim.acl.dtypes import DataType, bf16_to_float32, float32_to_bf16
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor
from opsim.opdev import dfx
from opsim.opdev.executor import destroy_executor, set_repeatable
from opsim.ops import fused
from opsim.ops.fused import (ADD_REDUCE, BIAS_RELU, DIRECT_INVOKE_OPS, NORMALIZE, aclnn_add_rms_norm,
                             aclnn_add_rms_norm_get_workspace_size, aclnn_fused_bias_relu,
                             aclnn_fused_bias_relu_get_workspace_size, select_add_rms_norm)
from opsim.runtime import acl_rt
from opsim.runtime.host_thread import run_op
from opsim.runtime.simulation import Simulation

S = AclnnStatus
EPS = 1e-6


def device_tensor(sim, shape, dtype, values=None):
    """A user device tensor (aclrtMalloc + aclCreateTensor) holding `values` (float32, converted)."""
    t = Tensor(list(shape), dtype)
    status, addr = sim.device.memory.malloc(max(t.storage_nbytes, 1))
    assert status == S.ACLNN_SUCCESS
    t.set_storage_address(addr)
    t.storage.memory = sim.device.memory
    if values is not None:
        t.write(to_storage(np.asarray(values, np.float32), dtype))
    return t


def to_storage(values, dtype):
    if dtype == DataType.DT_BF16:
        return float32_to_bf16(values)
    return values.astype(dtype.numpy_dtype)


def to_float(t: Tensor) -> np.ndarray:
    arr = np.array(t.numpy())
    return bf16_to_float32(arr) if t.dtype == DataType.DT_BF16 else arr.astype(np.float32)


def round_to(values, dtype):
    stored = to_storage(np.asarray(values, np.float32), dtype)
    return bf16_to_float32(stored) if dtype == DataType.DT_BF16 else stored.astype(np.float32)


def reference_add_rms_norm(x1, x2, gamma, dtype):
    x = round_to(x1 + x2, dtype)
    rstd = (1.0 / np.sqrt(np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True) + EPS)).astype(np.float32)
    return round_to(x * rstd * gamma, dtype), rstd, x


def simulate_add_rms_norm(shape, dtype, *, runs=1, repeat=False, seed=0, streams=1, x1_values=None,
                          capture=False, **sim_kw):
    sim = Simulation(numerics=True, **sim_kw)
    rng = np.random.default_rng(seed)
    x1v = rng.standard_normal(shape).astype(np.float32) if x1_values is None else x1_values
    x2v = rng.standard_normal(shape).astype(np.float32)
    gv = rng.uniform(0.5, 1.5, shape[-1:]).astype(np.float32)
    x1v, x2v, gv = round_to(x1v, dtype), round_to(x2v, dtype), round_to(gv, dtype)
    x1, x2 = device_tensor(sim, shape, dtype, x1v), device_tensor(sim, shape, dtype, x2v)
    gamma = device_tensor(sim, shape[-1:], dtype, gv)
    y, x_out = device_tensor(sim, shape, dtype), device_tensor(sim, shape, dtype)
    rstd = device_tensor(sim, list(shape[:-1]) + [1], DataType.DT_FLOAT)
    out = {"statuses": [], "sizes": []}

    def program(th):
        stream_list = [sim.device.create_stream() for _ in range(streams)]
        out["streams"] = [s.stream_id for s in stream_list]
        if capture:
            dfx.begin_capture(stream_list[0])
        if not repeat:
            for i in range(runs):
                status, size = yield from run_op(th, aclnn_add_rms_norm_get_workspace_size, aclnn_add_rms_norm,
                                                 (x1, x2, gamma, EPS, y, rstd, x_out), stream_list[i % streams],
                                                 "aclnnAddRmsNorm")
                out["statuses"].append(status)
                out["sizes"].append(size)
        else:
            status, size, ex = yield from th.call(aclnn_add_rms_norm_get_workspace_size, x1, x2, gamma, EPS, y,
                                                  rstd, x_out)
            assert status == S.ACLNN_SUCCESS
            assert (yield from th.call(set_repeatable, ex)) == S.ACLNN_SUCCESS
            out["sizes"].append(size)
            status, ws = yield from th.call(acl_rt.malloc, size)
            for i in range(runs):
                out["statuses"].append((yield from th.call(aclnn_add_rms_norm, ws, size, ex, stream_list[i % streams])))
            yield from th.call(destroy_executor, ex)
            yield from th.call(acl_rt.synchronize_device)
            yield from th.call(acl_rt.free, ws)
        for s in stream_list:
            yield from th.call(acl_rt.synchronize_stream, s)

    sim.add_thread(program, "t0")
    sim.run()
    out.update(sim=sim, x1=x1v, x2=x2v, gamma=gv, y=y, rstd=rstd, x_out=x_out)
    return out


def device_rows(sim):
    dev = sim.recorder.records("device")
    return [dict(zip(dev, row)) for row in zip(*dev.values())]


def host_phases(sim, phase):
    host = sim.recorder.records("host")
    return [op for p, op in zip(host["phase"], host["op"]) if p == phase]


@pytest.mark.parametrize("dtype,rtol", [(DataType.DT_FLOAT, 1e-5), (DataType.DT_FLOAT16, 2e-3),
                                        (DataType.DT_BF16, 1.6e-2)])
@pytest.mark.parametrize("shape", [(6, 64), (2, 3, 40)])
def test_add_rms_norm_numerics_match_numpy(dtype, rtol, shape):
    r = simulate_add_rms_norm(shape, dtype)
    assert r["statuses"] == [0]
    y_ref, rstd_ref, x_ref = reference_add_rms_norm(r["x1"], r["x2"], r["gamma"], dtype)
    np.testing.assert_array_equal(to_float(r["x_out"]), x_ref)
    np.testing.assert_allclose(to_float(r["rstd"]), rstd_ref, rtol=1e-5)
    np.testing.assert_allclose(to_float(r["y"]), y_ref, rtol=rtol, atol=rtol)


def test_two_dispatches_in_order_on_the_callers_stream():
    r = simulate_add_rms_norm((8, 128), DataType.DT_FLOAT, runs=2)
    rows = [row for row in device_rows(r["sim"]) if row["op"] in (ADD_REDUCE, NORMALIZE)]
    assert [row["op"] for row in rows] == [ADD_REDUCE, NORMALIZE] * 2
    assert {row["stream"] for row in rows} == set(r["streams"])
    assert all(a["end"] <= b["start"] + 1e-9 for a, b in zip(rows, rows[1:]))
    assert rows[0]["corr"] == rows[1]["corr"] != rows[2]["corr"] == rows[3]["corr"]  # one correlation per call
    assert all(row["task_type"] == "AI_VECTOR_CORE" for row in rows)
    assert r["sim"].device.memory.in_use == sum(a.size for a in r["sim"].device.memory.leaks())


def test_single_and_two_pass_selection_and_workspace_size():
    assert select_add_rms_norm(6, 64, DataType.DT_FLOAT, 6) == ("single-pass", 1, (24,))
    assert select_add_rms_norm(2, 9000, DataType.DT_FLOAT16, 2) == ("single-pass", 1, (8,))
    assert select_add_rms_norm(2, 9000, DataType.DT_FLOAT, 2) == ("two-pass", 2, (16, 64))
    single = simulate_add_rms_norm((6, 64), DataType.DT_FLOAT)
    assert single["sizes"] == [512]  # Align(24)
    two = simulate_add_rms_norm((2, 9000), DataType.DT_FLOAT)
    assert two["sizes"] == [1024]  # Align(16) + Align(64): one node's workspaces never share
    y_ref, rstd_ref, x_ref = reference_add_rms_norm(two["x1"], two["x2"], two["gamma"], DataType.DT_FLOAT)
    np.testing.assert_allclose(to_float(two["y"]), y_ref, rtol=1e-5, atol=1e-5)
    ops = [row["op"] for row in device_rows(two["sim"])]
    assert ops.count(ADD_REDUCE) == ops.count(NORMALIZE) == 1


def test_repeat_prepares_once_and_launches_every_run_on_each_stream():
    r = simulate_add_rms_norm((4, 32), DataType.DT_FLOAT, runs=3, repeat=True, streams=3)
    sim = r["sim"]
    assert r["statuses"] == [0, 0, 0]
    assert len(host_phases(sim, "prepare")) == 1
    assert len(host_phases(sim, "direct invoke launch")) == 3 and len(host_phases(sim, "destroy")) == 1
    rows = [row for row in device_rows(sim) if row["op"] in (ADD_REDUCE, NORMALIZE)]
    assert [row["stream"] for row in rows] == [s for s in r["streams"] for _ in range(2)]
    assert "cache replay" not in sim.recorder.records("host")["phase"]
    y_ref, _, _ = reference_add_rms_norm(r["x1"], r["x2"], r["gamma"], DataType.DT_FLOAT)
    np.testing.assert_allclose(to_float(r["y"]), y_ref, rtol=1e-5, atol=1e-5)


def test_each_call_prepares_again_no_phase1_cache_hit():
    r = simulate_add_rms_norm((4, 32), DataType.DT_FLOAT, runs=3)
    sim = r["sim"]
    assert len(host_phases(sim, "prepare")) == 3 and len(host_phases(sim, "destroy")) == 3
    cache = sim.recorder.records("cache")
    assert "hit" not in [k for c, k in zip(cache["cache"], cache["kind"]) if c == "exec"]


@pytest.mark.parametrize("capture", [False, True])
def test_overflow_detection_on_a_real_stream_and_capture_skip(capture):
    x1 = np.zeros((2, 16), np.float32)
    x1[0, 3] = np.inf
    r = simulate_add_rms_norm((2, 16), DataType.DT_FLOAT, x1_values=x1, overflow_dump=True, capture=capture)
    assert r["statuses"] == [0]
    process = r["sim"].process
    if capture:
        assert process.overflows == [] and not host_phases(r["sim"], "overflow check")
    else:
        assert len(process.overflows) == 1 and process.overflows[0][1] == "AddRmsNorm"
        assert r["sim"].recorder.records("instant")["name"].count("overflow") == 1


@pytest.mark.parametrize("dtype", [DataType.DT_FLOAT, DataType.DT_FLOAT16])
def test_stateless_bias_relu_end_to_end(dtype):
    sim = Simulation(numerics=True)
    rng = np.random.default_rng(1)
    xv = round_to(rng.standard_normal((5, 24)), dtype)
    bv = round_to(rng.standard_normal(24), dtype)
    x, b = device_tensor(sim, (5, 24), dtype, xv), device_tensor(sim, (24,), dtype, bv)
    out = device_tensor(sim, (5, 24), dtype)
    result = {}

    def program(th):
        stream = sim.device.create_stream()
        result["run"] = yield from run_op(th, aclnn_fused_bias_relu_get_workspace_size, aclnn_fused_bias_relu,
                                          (x, b, out), stream, "aclnnFusedBiasRelu")
        yield from th.call(acl_rt.synchronize_stream, stream)

    sim.add_thread(program)
    sim.run()
    assert result["run"] == (0, 0)  # no workspace
    np.testing.assert_allclose(to_float(out), round_to(np.maximum(xv + bv, 0.0), dtype), rtol=1e-3)
    assert [row["op"] for row in device_rows(sim)] == [BIAS_RELU]
    assert host_phases(sim, "prepare") and not host_phases(sim, "destroy")  # null state: destroy never runs


def test_catalogue_entries_are_registry_op_specs():
    from opsim.ops.registry import catalogue_from_module
    specs = catalogue_from_module("opsim.ops.fused", "DIRECT_INVOKE_OPS", "DIRECT_INVOKE")
    assert set(specs) == set(DIRECT_INVOKE_OPS) == {"AddRmsNorm", "FusedBiasRelu"}
    for spec in specs.values():
        assert spec.launchers == ("DIRECT_INVOKE",) and spec.api.startswith("aclnn")
        assert set(spec.dtypes) == {"float", "float16", "bf16"}
    arn = specs["AddRmsNorm"]
    assert arn.infer([(3, 4, 8), (3, 4, 8), (8,)], arn.attrs) == [(3, 4, 8), (3, 4, 1), (3, 4, 8)]
    assert "gamma shape" in arn.infer([(3, 8), (3, 8), (4,)], arn.attrs)
    assert "x2 shape" in arn.infer([(3, 8), (3, 9), (8,)], arn.attrs)
    assert specs["FusedBiasRelu"].infer([(5, 24), (24,)], {}) == [(5, 24)]
    assert "bias shape" in specs["FusedBiasRelu"].infer([(5, 24), (5,)], {})
    assert fused.add_rms_norm_shapes([3, 4, 8], 2)["rstd"] == [3, 1, 1]


@pytest.mark.parametrize("name", ["AddRmsNorm", "FusedBiasRelu"])
def test_catalogue_entry_drives_a_call(name):
    """What the scenario runner does with a spec: infer, build the phase-1 tuple from placed tensors, run."""
    from opsim.ops.registry import catalogue_from_module
    spec = catalogue_from_module("opsim.ops.fused", "DIRECT_INVOKE_OPS", "DIRECT_INVOKE")[name]
    sim = Simulation(numerics=True)
    dtype = DataType.DT_FLOAT16
    in_shapes = {"AddRmsNorm": [(4, 32), (4, 32), (32,)], "FusedBiasRelu": [(4, 32), (32,)]}[name]
    rng = np.random.default_rng(2)
    ins = [device_tensor(sim, s, dtype, rng.standard_normal(s)) for s in in_shapes]
    out_shapes = spec.infer(in_shapes, spec.attrs)
    args = spec.build(lambda shape, dt, role: device_tensor(sim, shape, DataType.parse(dt)), ins, dtype,
                      spec.attrs, out_shapes)
    get_ws, run = spec.resolve()
    result = {}

    def program(th):
        stream = sim.device.create_stream()
        result["run"] = yield from run_op(th, get_ws, run, args, stream, spec.api)
        yield from th.call(acl_rt.synchronize_stream, stream)

    sim.add_thread(program)
    sim.run()
    assert result["run"][0] == 0
    ops = [row["op"] for row in device_rows(sim) if row["task_type"] != "HOST_FUNC"]  # not the workspace free
    assert ops == ([ADD_REDUCE, NORMALIZE] if name == "AddRmsNorm" else [BIAS_RELU])


def test_parameter_checks(caplog):
    from opsim.opdev.process import ProcessContext
    from opsim.opdev.thread_local import set_current
    process = ProcessContext()
    prev = set_current(process.new_thread())
    try:
        f32, f16 = DataType.DT_FLOAT, DataType.DT_FLOAT16
        x = Tensor([4, 8], f32)
        ok = (x, Tensor([4, 8], f32), Tensor([8], f32), EPS, Tensor([4, 8], f32), Tensor([4, 1], f32),
              Tensor([4, 8], f32))
        assert aclnn_add_rms_norm_get_workspace_size(*ok)[0] == S.ACLNN_SUCCESS
        bad = {2: Tensor([4], f32), 5: Tensor([4, 1], f16), 1: Tensor([4, 8], f16), 6: Tensor([4, 9], f32)}
        for i, t in bad.items():
            args = list(ok)
            args[i] = t
            assert aclnn_add_rms_norm_get_workspace_size(*args)[0] == S.ACLNN_ERR_PARAM_INVALID, i
        args = list(ok)
        args[0] = None
        assert aclnn_add_rms_norm_get_workspace_size(*args)[0] == S.ACLNN_ERR_PARAM_NULLPTR
        assert aclnn_fused_bias_relu_get_workspace_size(x, Tensor([4], f32), Tensor([4, 8], f32))[0] == \
            S.ACLNN_ERR_PARAM_INVALID
        status, size, ex = aclnn_add_rms_norm_get_workspace_size(
            Tensor([0, 8], f32), Tensor([0, 8], f32), Tensor([8], f32), EPS, Tensor([0, 8], f32),
            Tensor([0, 1], f32), Tensor([0, 8], f32))
        assert status == S.ACLNN_SUCCESS and size == 0 and ex.kernel_launch_obj_list == []
    finally:
        set_current(prev)
