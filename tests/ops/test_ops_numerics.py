"""Operators through the full framework path (phase 1, phase 2, replay) against numpy, with real device bytes."""
from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings, strategies as st

from opsim.acl import AclnnStatus as S, DataType, IntArray, Scalar, Tensor, bf16_to_float32, from_compute
from opsim.device.memory import DeviceMemory
from opsim.opdev.op_exec_cache import OpExecCacheWrap
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import set_current
from opsim.ops import elementwise as E, matmul as M, reduce as R, softmax as SM
from opsim.trace.recorder import Recorder

FLOATS = [DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16]
TOL = {DataType.DT_FLOAT: 1e-5, DataType.DT_FLOAT16: 2e-3, DataType.DT_BF16: 1.6e-2}


class World:
    """A process with numerics on, device memory and one thread context (no SimPy scheduling needed)."""

    def __init__(self):
        env = simpy.Environment()
        self.mem = DeviceMemory(1 << 30, Recorder(False), env, numerics=True)

        class _Dev:  # the process only needs .memory and .soc from the device
            memory = self.mem
            soc = None
        self.process = ProcessContext(device=_Dev(), numerics=True)
        self.ctx = self.process.new_thread()
        set_current(self.ctx)

    def tensor(self, values, dtype) -> Tensor:
        dt = DataType.parse(dtype)
        arr = np.asarray(values)
        status, addr = self.mem.malloc(max(dt.nbytes(arr.size), 1))
        assert status == S.ACLNN_SUCCESS
        t = Tensor(arr.shape, dt, address=addr)
        t.storage.memory = self.mem
        t.write(from_compute(arr.astype(np.float32) if dt in FLOATS else arr, dt))
        return t

    def empty(self, shape, dtype) -> Tensor:
        return self.tensor(np.zeros(shape), dtype)

    def run(self, get_ws, run, *args):
        status, size, ex = get_ws(*args)
        assert status == S.ACLNN_SUCCESS
        ws = 0
        if size:
            st_, ws = self.mem.malloc(size)
        assert run(ws, size, ex, None) == S.ACLNN_SUCCESS
        return ex


def value(t: Tensor) -> np.ndarray:
    a = np.array(t.numpy())
    return bf16_to_float32(a) if t.dtype == DataType.DT_BF16 else a.astype(np.float64)


def rounded(x: np.ndarray, dtype: DataType) -> np.ndarray:
    return value_of(from_compute(np.asarray(x, dtype=np.float32), dtype), dtype)


def value_of(arr, dtype):
    return bf16_to_float32(arr) if dtype == DataType.DT_BF16 else np.asarray(arr, dtype=np.float64)


def close(actual, expected, dtype):
    if dtype in TOL:
        np.testing.assert_allclose(actual, expected, rtol=TOL[dtype], atol=TOL[dtype])
    else:
        np.testing.assert_array_equal(actual, expected)


@pytest.fixture
def world():
    w = World()
    yield w
    set_current(None)


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3)
dtypes = st.sampled_from(FLOATS + [DataType.DT_INT32, DataType.DT_INT64])


@settings(max_examples=25, deadline=None)
@given(shape=shapes, dtype=dtypes, seed=st.integers(0, 2 ** 16), op=st.sampled_from(["Add", "Mul", "Abs", "Relu"]))
def test_elementwise_against_numpy(shape, dtype, seed, op):
    w = World()
    rng = np.random.default_rng(seed)
    a = rng.integers(-50, 50, shape) if dtype in (DataType.DT_INT32, DataType.DT_INT64) else rng.standard_normal(shape)
    b = rng.integers(-50, 50, shape[-1:]) if dtype in (DataType.DT_INT32, DataType.DT_INT64) else rng.standard_normal(shape[-1:])
    ta, tb, out = w.tensor(a, dtype), w.tensor(b, dtype), w.empty(shape, dtype)
    fa, fb = value(ta), value(tb)
    if op == "Add":
        w.run(E.aclnn_add_get_workspace_size, E.aclnn_add, ta, tb, Scalar(2, dtype if dtype not in FLOATS else "float"), out)
        expected = fa + 2 * fb
    elif op == "Mul":
        w.run(E.aclnn_mul_get_workspace_size, E.aclnn_mul, ta, tb, out)
        expected = fa * fb
    elif op == "Abs":
        w.run(E.aclnn_abs_get_workspace_size, E.aclnn_abs, ta, out)
        expected = np.abs(fa)
    else:
        w.run(E.aclnn_relu_get_workspace_size, E.aclnn_relu, ta, out)
        expected = np.maximum(fa, 0)
    close(value(out), rounded(expected, dtype) if dtype in FLOATS else expected, dtype)
    set_current(None)


@pytest.mark.parametrize("src, dst", [("float", "fp16"), ("fp16", "bf16"), ("bf16", "float"), ("float", "int32"),
                                      ("int64", "float"), ("int32", "int64"), ("float", "bool")])
def test_cast(world, src, dst):
    rng = np.random.default_rng(3)
    x = world.tensor(rng.standard_normal((3, 4)) * 10, src)
    out = world.empty((3, 4), dst)
    world.run(E.aclnn_cast_get_workspace_size, E.aclnn_cast, x, DataType.parse(dst), out)
    src_v = value(x)
    d = DataType.parse(dst)
    if d in FLOATS:
        close(value(out), rounded(src_v, d), d)
    elif d == DataType.DT_BOOL:
        np.testing.assert_array_equal(np.array(out.numpy()), src_v != 0)
    else:
        np.testing.assert_array_equal(np.array(out.numpy()), np.trunc(src_v).astype(d.numpy_dtype))


@pytest.mark.parametrize("dtype", FLOATS + [DataType.DT_INT32])
@pytest.mark.parametrize("axes, keep", [((1,), False), ((0, 1), True), ((), False)])
def test_reduce_sum(world, dtype, axes, keep):
    rng = np.random.default_rng(5)
    data = rng.integers(-9, 9, (4, 6000)) if dtype == DataType.DT_INT32 else rng.standard_normal((4, 6000))
    x = world.tensor(data, dtype)
    expected = value(x).sum(axis=axes if axes else None, keepdims=keep)
    out = world.empty(np.shape(expected), dtype)
    world.run(R.aclnn_reduce_sum_get_workspace_size, R.aclnn_reduce_sum, x, IntArray(axes), keep, dtype, out)
    tol = {DataType.DT_FLOAT: 1e-4, DataType.DT_FLOAT16: 5e-3, DataType.DT_BF16: 2e-2}
    if dtype in tol:
        np.testing.assert_allclose(value(out), expected, rtol=tol[dtype], atol=tol[dtype] * 100)
    else:
        np.testing.assert_array_equal(value(out), expected)


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(world, dtype):
    x = world.tensor(np.random.default_rng(1).standard_normal((5, 7)), dtype)
    out = world.empty((5, 7), dtype)
    world.run(SM.aclnn_softmax_get_workspace_size, SM.aclnn_softmax, x, -1, out)
    v = value(x)
    e = np.exp(v - v.max(-1, keepdims=True))
    close(value(out), rounded(e / e.sum(-1, keepdims=True), dtype), dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_matmul_and_addmm(world, dtype):
    rng = np.random.default_rng(2)
    a, b, bias = world.tensor(rng.standard_normal((6, 8)), dtype), world.tensor(rng.standard_normal((8, 5)), dtype), \
        world.tensor(rng.standard_normal((5,)), dtype)
    mm = world.empty((6, 5), dtype)
    world.run(M.aclnn_matmul_get_workspace_size, M.aclnn_matmul, a, b, mm)
    ref = value(a) @ value(b)
    close(value(mm), rounded(ref, dtype), dtype)
    out = world.empty((6, 5), dtype)
    world.run(M.aclnn_addmm_get_workspace_size, M.aclnn_addmm, bias, a, b, Scalar(0.5), Scalar(2.0), out)
    tol = {DataType.DT_FLOAT: 1e-5, DataType.DT_FLOAT16: 1e-2, DataType.DT_BF16: 6e-2}[dtype]
    np.testing.assert_allclose(value(out), 0.5 * value(bias) + 2.0 * ref, rtol=tol, atol=tol)


def test_cache_hit_replays_with_new_addresses_and_identical_numerics(world):
    rng = np.random.default_rng(9)
    results = []
    for i in range(3):
        a, b = world.tensor(rng.standard_normal((4, 8)), "float"), world.tensor(rng.standard_normal((8, 3)), "float")
        bias, out = world.tensor(rng.standard_normal((3,)), "float"), world.empty((4, 3), "float")
        ex = world.run(M.aclnn_addmm_get_workspace_size, M.aclnn_addmm, bias, a, b, Scalar(1.0), Scalar(1.0), out)
        assert isinstance(ex, OpExecCacheWrap) == (i > 0)  # calls 2 and 3 skip phase 1
        expected = value(bias) + value(a) @ value(b)
        np.testing.assert_allclose(value(out), expected, rtol=1e-5, atol=1e-5)
        results.append(value(out))
    assert not np.allclose(results[0], results[1])  # different data, really recomputed at the new addresses
