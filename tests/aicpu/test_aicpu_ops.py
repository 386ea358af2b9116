"""AI CPU operators end to end in a simulation: numerics against numpy, parameter checks, the spaces their L0
code declares, the DEPEND_SHAPE_RANGE output shape, and the scenario catalogue entries."""
from __future__ import annotations

import numpy as np
import pytest

from opsim.acl import DataType, IntArray, Scalar, Tensor, TensorList
from opsim.acl.dtypes import bf16_to_float32, float32_to_bf16
from opsim.acl.status import AclnnStatus
from opsim.opdev.op_def import UnknowShapeOpType
from opsim.ops import aicpu_ops as A
from opsim.runtime.host_thread import run_op
from opsim.runtime.simulation import Simulation

S = AclnnStatus
F32, F16, BF16 = DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16
I32, I64 = DataType.DT_INT32, DataType.DT_INT64


class Env:
    """A numerics simulation and user device tensors in its memory."""

    def __init__(self, numerics: bool = True):
        self.sim = Simulation(numerics=numerics, trace=True)

    def tensor(self, shape, dtype, values=None) -> Tensor:
        t = Tensor(list(shape), dtype)
        status, addr = self.sim.device.memory.malloc(max(t.storage_nbytes, 1))
        assert status == S.ACLNN_SUCCESS
        t.set_storage_address(addr)
        t.storage.memory = self.sim.device.memory
        if values is not None:
            t.write(to_storage(np.asarray(values), t.dtype))
        else:
            t.write(np.zeros(t.view_shape, t.dtype.numpy_dtype))
        return t

    def call(self, gws, run, *args, times: int = 1) -> list[int]:
        """`times` calls on one new host thread; their statuses."""
        statuses = []

        def program(th):
            stream = self.sim.device.create_stream()
            for _ in range(times):
                status, _ = yield from run_op(th, gws, run, args, stream)
                statuses.append(status)

        self.sim.add_thread(program)
        self.sim.run()
        return statuses


def to_storage(values, dtype):
    if dtype == BF16:
        return float32_to_bf16(np.asarray(values, np.float32))
    return np.asarray(values).astype(dtype.numpy_dtype)


def as_float(t: Tensor) -> np.ndarray:
    arr = np.array(t.numpy())
    return bf16_to_float32(arr) if t.dtype == BF16 else arr.astype(np.float64)


def rounded(values, dtype) -> np.ndarray:
    stored = to_storage(np.asarray(values, np.float32), dtype)
    return bf16_to_float32(stored).astype(np.float64) if dtype == BF16 else stored.astype(np.float64)


# ---- IndexPut ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F16, BF16, I32, I64])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_numerics(dtype, accumulate):
    rng = np.random.default_rng(1)
    e = Env()
    base = rng.integers(-5, 5, (5, 4)).astype(np.float32)
    vals = rng.integers(-3, 3, (4, 4)).astype(np.float32)
    rows = np.array([3, 0, 3, 1]) if accumulate else np.array([3, 0, 2, 1])
    self_t = e.tensor([5, 4], dtype, base)
    idx = e.tensor([4], I64, rows)
    values = e.tensor([4, 4], dtype, vals)
    assert e.call(A.aclnn_index_put_impl_get_workspace_size, A.aclnn_index_put_impl, self_t, TensorList([idx]),
                  values, accumulate, False) == [0]
    want = base.astype(np.float64).copy()
    if accumulate:
        np.add.at(want, rows, vals)
    else:
        want[rows] = vals
    np.testing.assert_array_equal(as_float(self_t), rounded(want, dtype))


def test_index_put_two_int32_index_tensors_broadcast_values():
    e = Env()
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    self_t = e.tensor([2, 3, 4], F32, base)
    i0, i1 = e.tensor([2], I32, [1, 0]), e.tensor([2], I32, [2, 2])
    values = e.tensor([4], F32, [9, 8, 7, 6])
    assert e.call(A.aclnn_index_put_impl_get_workspace_size, A.aclnn_index_put_impl, self_t,
                  TensorList([i0, i1]), values, False) == [0]
    want = base.copy()
    want[[1, 0], [2, 2]] = [9, 8, 7, 6]
    np.testing.assert_array_equal(self_t.numpy(), want)


def test_index_put_declares_a_libpt_space_with_ref_and_reuses_the_task():
    e = Env()
    self_t = e.tensor([4, 2], F32, np.zeros((4, 2)))
    idx = e.tensor([1], I64, [2])
    values = e.tensor([1, 2], F32, [[1, 1]])
    assert e.call(A.aclnn_index_put_impl_get_workspace_size, A.aclnn_index_put_impl, self_t,
                  TensorList([idx]), values, True, times=3) == [0, 0, 0]
    space = e.sim.process.aicpu_spaces[("IndexPut", int(UnknowShapeOpType.DEPEND_IN_SHAPE), False)]
    assert space.is_ref(0) and space.task_count == 1 and space.tasks()[0].kernel_so == "libpt_kernels.so"
    cache = e.sim.recorder.records("cache")
    assert [k for c, k in zip(cache["cache"], cache["kind"]) if c == "aicpu"] == ["miss", "hit", "hit"]
    np.testing.assert_array_equal(self_t.numpy()[2], [3, 3])


def test_index_put_empty_self_registers_nothing():
    e = Env()
    self_t = e.tensor([0, 2], F32)
    status, size, ex = _phase1(e, A.aclnn_index_put_impl_get_workspace_size, self_t,
                               TensorList([e.tensor([1], I64, [0])]), e.tensor([1, 2], F32), False)
    assert status == S.ACLNN_SUCCESS and ex.kernel_launch_obj_list == []


def _phase1(e, gws, *args):
    from opsim.opdev.thread_local import set_current
    set_current(e.sim.process.new_thread())
    return gws(*args)


@pytest.mark.parametrize("case,expected", [
    ("null_values", S.ACLNN_ERR_PARAM_NULLPTR), ("null_index", S.ACLNN_ERR_PARAM_NULLPTR),
    ("dtype_mismatch", S.ACLNN_ERR_PARAM_INVALID), ("float_index", S.ACLNN_ERR_PARAM_INVALID),
    ("too_many_indices", S.ACLNN_ERR_PARAM_INVALID), ("bad_values_shape", S.ACLNN_ERR_PARAM_INVALID)])
def test_index_put_parameter_checks(case, expected):
    e = Env(numerics=False)
    self_t, idx, values = Tensor([4, 2], F32), Tensor([3], I64), Tensor([3, 2], F32)
    indices = TensorList([idx])
    if case == "null_values":
        values = None
    elif case == "null_index":
        indices = TensorList([None])
    elif case == "dtype_mismatch":
        values = Tensor([3, 2], F16)
    elif case == "float_index":
        indices = TensorList([Tensor([3], F32)])
    elif case == "too_many_indices":
        indices = TensorList([idx, idx, idx])
    elif case == "bad_values_shape":
        values = Tensor([3, 5], F32)
    status, _, ex = _phase1(e, A.aclnn_index_put_impl_get_workspace_size, self_t, indices, values, False)
    assert status == expected and ex is None


# ---- Pad -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F16, I32, DataType.DT_INT8])
def test_pad_numerics(dtype):
    e = Env()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    pad = [1, 2, 0, 1]                       # last dim (1 before, 2 after), then dim 0 (0 before, 1 after)
    xt = e.tensor([2, 3], dtype, x)
    out = e.tensor([3, 6], dtype)
    assert e.call(A.aclnn_pad_aicpu_get_workspace_size, A.aclnn_pad_aicpu, xt, IntArray(pad), Scalar(3.0),
                  out) == [0]
    want = np.pad(x, ((0, 1), (1, 2)), constant_values=3.0)
    np.testing.assert_array_equal(as_float(out), rounded(want, dtype))


def test_pad_negative_crops():
    e = Env()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    xt, out = e.tensor([3, 4], F32, x), e.tensor([3, 3], F32)
    assert e.call(A.aclnn_pad_aicpu_get_workspace_size, A.aclnn_pad_aicpu, xt, IntArray([-1, 0]), Scalar(0.0),
                  out) == [0]
    np.testing.assert_array_equal(out.numpy(), x[:, 1:])


def test_pad_paddings_conversion_and_checks():
    assert A.pad_paddings([1, 2, 3, 4], 3) == [0, 0, 3, 4, 1, 2]
    assert A.pad_paddings([1], 2) is None and A.pad_paddings([0] * 6, 2) is None
    e = Env(numerics=False)
    status, _, _ = _phase1(e, A.aclnn_pad_aicpu_get_workspace_size, Tensor([2, 3]), IntArray([1]), Scalar(0.0),
                           Tensor([2, 4]))
    assert status == S.ACLNN_ERR_PARAM_INVALID
    status, _, _ = _phase1(e, A.aclnn_pad_aicpu_get_workspace_size, Tensor([2, 3]), IntArray([1, 1]), Scalar(0.0),
                           Tensor([2, 4]))
    assert status == S.ACLNN_ERR_PARAM_INVALID      # out must be [2, 5]


# ---- Sigmoid ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_sigmoid_numerics(dtype):
    e = Env()
    x = np.linspace(-6, 6, 24, dtype=np.float32).reshape(4, 6)
    xt, out = e.tensor([4, 6], dtype, x), e.tensor([4, 6], dtype)
    assert e.call(A.aclnn_sigmoid_aicpu_get_workspace_size, A.aclnn_sigmoid_aicpu, xt, out) == [0]
    xs = rounded(x, dtype).astype(np.float32)
    want = rounded(1.0 / (1.0 + np.exp(-xs)), dtype)
    np.testing.assert_allclose(as_float(out), want, rtol=1e-6, atol=1e-7)


def test_sigmoid_rejects_integers():
    e = Env(numerics=False)
    status, _, _ = _phase1(e, A.aclnn_sigmoid_aicpu_get_workspace_size, Tensor([2], I32), Tensor([2], I32))
    assert status == S.ACLNN_ERR_PARAM_INVALID


# ---- ReduceSum --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, I32, I64])
@pytest.mark.parametrize("dim,keepdim", [([1], False), ([0, -1], True), ([], False)])
def test_reduce_sum_numerics(dtype, dim, keepdim):
    e = Env()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    axes = tuple(sorted({d % 3 for d in dim})) or (0, 1, 2)
    want = x.sum(axis=axes, keepdims=keepdim)
    xt, out = e.tensor([2, 3, 4], dtype, x), e.tensor(list(want.shape), dtype)
    assert e.call(A.aclnn_reduce_sum_aicpu_get_workspace_size, A.aclnn_reduce_sum_aicpu, xt, IntArray(dim),
                  keepdim, out) == [0]
    np.testing.assert_array_equal(as_float(out), want.astype(np.float64))


def test_reduce_sum_axes_travel_as_a_host_input():
    e = Env()
    xt, out = e.tensor([2, 3], F32, np.ones((2, 3))), e.tensor([2], F32)
    assert e.call(A.aclnn_reduce_sum_aicpu_get_workspace_size, A.aclnn_reduce_sum_aicpu, xt, IntArray([1]),
                  False, out) == [0]
    task = e.sim.process.aicpu_spaces[("ReduceSum", 1, False)].tasks()[0]
    assert task.use_new_launch is False and task.host_input_placement == [(1, "inline", 0)]
    assert task.key[8:12] == bytes([int(F32), 2, int(I64), 2])   # the axes key as a DT_INT64 ND tensor


# ---- NonZero ---------------------------------------------------------------------------------------------

def test_nonzero_numerics_and_output_shape():
    e = Env()
    rng = np.random.default_rng(3)
    x = (rng.random((4, 5)) < 0.3).astype(np.float32) * rng.standard_normal((4, 5)).astype(np.float32)
    xt, out = e.tensor([4, 5], F32, x), e.tensor([20, 2], I64)
    assert e.call(A.aclnn_nonzero_get_workspace_size, A.aclnn_nonzero, xt, out) == [0]
    want = np.argwhere(x)
    assert tuple(out.view_shape) == want.shape
    np.testing.assert_array_equal(out.numpy(), want)
    space = e.sim.process.aicpu_spaces[("NonZero", int(UnknowShapeOpType.DEPEND_SHAPE_RANGE), False)]
    task = space.tasks()[0]
    assert task.device_ext_mem_size > 0
    dev = e.sim.recorder.records("device")
    ops = [op for op in dev["op"] if op != "free_async"]
    assert ops == ["AicpuExtInfo", "NonZero", "AicpuOutputShape"]


def test_nonzero_without_numerics_reports_the_upper_bound():
    e = Env(numerics=False)
    xt, out = Tensor([3, 3], F32), Tensor([9, 2], I64)
    assert e.call(A.aclnn_nonzero_get_workspace_size, A.aclnn_nonzero, xt, out) == [0]
    assert tuple(out.view_shape) == (9, 2)


def test_nonzero_checks_out():
    e = Env(numerics=False)
    status, _, _ = _phase1(e, A.aclnn_nonzero_get_workspace_size, Tensor([3, 3]), Tensor([9, 2], F32))
    assert status == S.ACLNN_ERR_PARAM_INVALID
    status, _, _ = _phase1(e, A.aclnn_nonzero_get_workspace_size, Tensor([3, 3]), Tensor([8, 2], I64))
    assert status == S.ACLNN_ERR_PARAM_INVALID


# ---- Roll (TF) -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, BF16, DataType.DT_UINT8])
def test_roll_numerics(dtype):
    e = Env()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    xt, out = e.tensor([3, 4], dtype, x), e.tensor([3, 4], dtype)
    assert e.call(A.aclnn_roll_get_workspace_size, A.aclnn_roll, xt, IntArray([1, -2]), IntArray([0, 1]),
                  out) == [0]
    np.testing.assert_array_equal(as_float(out), rounded(np.roll(x, [1, -2], axis=[0, 1]), dtype))
    task = e.sim.process.aicpu_spaces[("Roll", 1, True)].tasks()[0]
    assert task.framework == "tf" and task.use_new_launch is False
    assert [i for i, _, _ in task.host_input_placement] == [1, 2]


def test_roll_checks():
    e = Env(numerics=False)
    x, out = Tensor([3, 4]), Tensor([3, 4])
    status, _, _ = _phase1(e, A.aclnn_roll_get_workspace_size, x, IntArray([1]), IntArray([0, 1]), out)
    assert status == S.ACLNN_ERR_PARAM_INVALID
    status, _, _ = _phase1(e, A.aclnn_roll_get_workspace_size, x, IntArray([1]), IntArray([2]), out)
    assert status == S.ACLNN_ERR_PARAM_INVALID


# ---- scenario catalogue -------------------------------------------------------------------------------------

def test_catalogue_entries_adapt_to_op_specs():
    from opsim.ops.registry import catalogue_from_module
    specs = catalogue_from_module("opsim.ops.aicpu_ops", "AICPU_OPS", "AI_CPU")
    assert sorted(specs) == ["IndexPut", "NonZero", "Pad", "ReduceSumAicpu", "Roll", "Sigmoid"]
    assert all(s.launchers == ("AI_CPU",) for s in specs.values())
    assert specs["IndexPut"].api == "aclnnIndexPutImpl" and "bf16" in specs["IndexPut"].dtypes
    for spec in specs.values():
        gws, run = spec.resolve()
        assert callable(gws) and callable(run)
    assert specs["Pad"].infer([(2, 3)], {"pad": [1, 2, 0, 1], "value": 0.0}) == [(3, 6)]
    assert specs["ReduceSumAicpu"].infer([(2, 3, 4)], {"dim": [1], "keepdim": True}) == [(2, 1, 4)]
    assert specs["NonZero"].infer([(2, 3)], {}) == [(6, 2)]
    assert specs["NonZero"].output_dtype(F32, {}) == I64
    assert specs["IndexPut"].infer([(5, 4), (3, 4)], {"indices": 1}) == []
    assert isinstance(specs["IndexPut"].infer([(5, 4), (3, 5)], {"indices": 1}), str)
    assert isinstance(specs["Roll"].infer([(2, 3)], {"shifts": [1], "dims": [4]}), str)


def test_catalogue_build_runs_end_to_end():
    from opsim.ops.registry import catalogue_from_module
    specs = catalogue_from_module("opsim.ops.aicpu_ops", "AICPU_OPS", "AI_CPU")
    e = Env()

    def make(shape, dtype, role):
        return e.tensor(shape, DataType.parse(dtype))

    for name, in_shapes, attrs in [("IndexPut", [(5, 4), (2, 4)], {"accumulate": True, "indices": 1}),
                                   ("Pad", [(2, 3)], {"pad": [1, 1], "value": 2.0}), ("Sigmoid", [(4,)], {}),
                                   ("ReduceSumAicpu", [(2, 3)], {"dim": [0], "keepdim": False}),
                                   ("NonZero", [(2, 2)], {}), ("Roll", [(3,)], {"shifts": [1], "dims": [0]})]:
        spec = specs[name]
        full = {**spec.attrs, **attrs}
        ins = [make(s, F32, "input") for s in in_shapes]
        outs = spec.infer(in_shapes, full)
        gws, run = spec.resolve()
        assert e.call(gws, run, *spec.build(make, ins, F32, full, outs)) == [0], name
