"""Operator numerics kernels against numpy references.

Exact ops (Add, Mul, Abs, Relu, Cast, Pad, IndexPut, NonZero, the non-finite check) must match numpy bit for
bit on the storage arrays; ops whose summation order or transcendental library differs (ReduceSum, Softmax,
Sigmoid, MatMul, RmsNorm) are held to an error bound derived from float32 accumulation plus one rounding of
the output. Property tests draw shapes (0-size dims and broadcasting included), dtypes and memory layouts
(contiguous, transposed, strided, reversed).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numba import njit

from opsim.acl.dtypes import DataType, bf16_to_float32, float32_to_bf16
from opsim.errors import InvalidArgumentError
from opsim.kernels import numerics as K
from opsim.kernels.dtype_bits import f16_to_f32, f16_to_f32_soft, f32_to_bf16, f32_to_f16, f32_to_f16_soft
from opsim.kernels.mathf32 import exp_f32, sigmoid_f32, tanh_f32

F32, F16, BF16 = DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16
I32, I64, I8, U8, BOOL = DataType.DT_INT32, DataType.DT_INT64, DataType.DT_INT8, DataType.DT_UINT8, DataType.DT_BOOL
FLOATS = [F32, F16, BF16]
ARITH = FLOATS + [I32, I64]
ALL = ARITH + [I8, U8, BOOL]

PROPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --- reference helpers ---------------------------------------------------------------------------------


def widen(storage: np.ndarray, dt: DataType) -> np.ndarray:
    """Storage -> float32 values (floating dtypes) or int64 values (integers and bool)."""
    if dt == BF16:
        return bf16_to_float32(storage)
    if dt in FLOATS:
        return storage.astype(np.float32)
    return storage.astype(np.int64)


def narrow(values: np.ndarray, dt: DataType) -> np.ndarray:
    """float32 (or int64) values -> storage of dt, rounding / wrapping like the kernels (finite, in range)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if dt == BF16:
            return float32_to_bf16(np.asarray(values, np.float32))
        if dt == F16:
            return np.asarray(values, np.float32).astype(np.float16)
        return np.asarray(values).astype(dt.numpy_dtype)


def random_storage(rng: np.random.Generator, shape, dt: DataType, special: bool = False,
                   scale: float = 3.0) -> np.ndarray:
    """Random values of dt in storage form; `special` sprinkles inf/nan/huge values into float arrays."""
    if dt in FLOATS:
        v = np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)
        if special and v.size:
            picks = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 7e4, -7e4, 3e38, 1e-8], np.float32)
            mask = np.asarray(rng.random(shape) < 0.2)
            v[mask] = rng.choice(picks, size=int(mask.sum()))
        return narrow(v, dt)
    if dt == BOOL:
        return np.asarray(rng.random(shape) < 0.5)
    info = np.iinfo(dt.numpy_dtype)
    return np.asarray(rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt.numpy_dtype))


def laid_out(rng: np.random.Generator, arr: np.ndarray, layout: str) -> np.ndarray:
    """The same values in another memory layout: a transposed copy, a strided slice or a reversed view."""
    if arr.ndim == 0 or layout == "c":
        return arr
    if layout == "transposed":
        return np.ascontiguousarray(arr.T).T
    if layout == "strided":
        big = np.empty(arr.shape[:-1] + (arr.shape[-1] * 2,), arr.dtype)
        big[..., ::2] = arr
        return big[..., ::2]
    rev = np.ascontiguousarray(arr[..., ::-1])
    return rev[..., ::-1]


LAYOUTS = st.sampled_from(["c", "transposed", "strided", "reversed"])
SEEDS = st.integers(0, 2**32 - 1)


def assert_bits_equal(got: np.ndarray, want: np.ndarray, dt: DataType) -> None:
    """Storage equality, with any NaN matching any NaN (payloads are not specified)."""
    assert got.shape == want.shape
    if dt in FLOATS:
        g, w = widen(got, dt), widen(want, dt)
        nan = np.isnan(w)
        np.testing.assert_array_equal(np.isnan(g), nan)
        np.testing.assert_array_equal(got[~nan], want[~nan])
    else:
        np.testing.assert_array_equal(got, want)


def out_rounding(dt: DataType) -> float:
    """Relative error of one rounding to dt (a unit in the last place, generous by 2x)."""
    return {F32: 2.0**-23, F16: 2.0**-10, BF16: 2.0**-7}[dt]


def assert_close(got: np.ndarray, ref64: np.ndarray, dt: DataType, bound: np.ndarray | float) -> None:
    """|got - ref| <= bound + one output rounding of |ref| (+ tiny absolute slack for half subnormals)."""
    g = widen(got, dt).astype(np.float64)
    err = np.abs(g - ref64)
    allowed = bound + out_rounding(dt) * np.abs(ref64) + 1e-7
    bad = ~(err <= allowed)
    assert not bad.any(), f"max excess {np.max((err - allowed)[bad])} at {np.argwhere(bad)[:3].tolist()}"


# --- half-float conversions ----------------------------------------------------------------------------


@njit
def _widen_all(fn_id, h, out):
    for i in range(h.size):
        out[i] = f16_to_f32(h[i]) if fn_id == 0 else f16_to_f32_soft(h[i])


@njit
def _narrow_all(fn_id, f, out):
    for i in range(f.size):
        out[i] = f32_to_f16(f[i]) if fn_id == 0 else f32_to_f16_soft(f[i])


@njit
def _bf16_all(f, out):
    for i in range(f.size):
        out[i] = f32_to_bf16(f[i])


def _halfway_candidates() -> np.ndarray:
    """Every finite half, its float32 neighbours and the midpoints between them: all rounding edge cases."""
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    h = np.unique(h[np.isfinite(h)])
    mids = ((h[:-1].astype(np.float64) + h[1:]) / 2).astype(np.float32)
    extra = np.float32([65504, 65519.996, 65520, 65536, 1e30, 5.96e-8, 2.98e-8, 2.9802326e-08, 1e-30])
    edges = np.concatenate([h, mids, extra, -mids, -extra])
    return np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)), np.nextafter(edges, np.float32(-np.inf))])


@pytest.mark.parametrize("fn_id", [0, 1], ids=["selected", "software"])
def test_f16_conversions_match_numpy_exhaustively(fn_id):
    """Both half conversion paths (F16C or integer code) agree with numpy on all halves and rounding edges."""
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    wide = np.empty(65536, np.float32)
    _widen_all(fn_id, bits, wide)
    ref = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(wide), nan)
    np.testing.assert_array_equal(wide.view(np.uint32)[~nan], ref.view(np.uint32)[~nan])

    rng = np.random.default_rng(1)
    f = np.concatenate([_halfway_candidates(), rng.integers(0, 2**32, 200_000, dtype=np.uint64)
                        .astype(np.uint32).view(np.float32)])
    got = np.empty(f.size, np.uint16)
    _narrow_all(fn_id, f, got)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want = f.astype(np.float16).view(np.uint16)
    nan = np.isnan(f)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.all((got[nan] & 0x7C00) == 0x7C00) and np.all(got[nan] & 0x03FF)


def test_bf16_rounding_matches_reference_helper():
    """Round to nearest even, ties to even, overflow to inf, NaN to 0x7FC0 (as opsim.acl.dtypes does)."""
    rng = np.random.default_rng(2)
    f = rng.integers(0, 2**32, 300_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f = np.concatenate([f, np.float32([1.00390625, 1.01171875, 3.3895314e38, 3.4e38, np.inf, -np.nan])])
    got = np.empty(f.size, np.uint16)
    _bf16_all(f, got)
    np.testing.assert_array_equal(got, float32_to_bf16(f))
    assert got[-6] == 0x3F80 and got[-5] == 0x3F82  # ties: 1+2^-8 -> 1.0 (even), 1+3*2^-8 -> up to even


@njit(error_model="numpy")
def _apply_f32(fn_id, x, out):
    for i in range(x.size):
        out[i] = exp_f32(x[i]) if fn_id == 0 else (tanh_f32(x[i]) if fn_id == 1 else sigmoid_f32(x[i]))


@pytest.mark.parametrize("fn_id, ref, max_ulp", [(0, np.exp, 1.0), (1, np.tanh, 1.5),
                                                  (2, lambda v: 1 / (1 + np.exp(-v)), 3.0)],
                         ids=["exp", "tanh", "sigmoid"])
def test_float32_transcendentals_are_accurate(fn_id, ref, max_ulp):
    """exp within 1 ulp over its whole range (normal results), tanh and sigmoid within a few ulp; specials."""
    rng = np.random.default_rng(3)
    x = np.concatenate([np.linspace(-104, 89, 400_001, dtype=np.float32),
                        rng.standard_normal(100_000).astype(np.float32) * np.float32(1e-3)])
    got = np.empty_like(x)
    _apply_f32(fn_id, x, got)
    with np.errstate(over="ignore"):
        want = ref(x.astype(np.float64))
    normal = np.isfinite(want) & (np.abs(want) > 1.2e-38) & (np.abs(want) < 3.4e38)
    ulp = np.abs(got[normal] - want[normal]) / np.spacing(np.abs(want[normal]).astype(np.float32))
    assert ulp.max() <= max_ulp
    specials = np.float32([np.inf, -np.inf, np.nan, 89.0, -104.0])
    out = np.empty_like(specials)
    _apply_f32(fn_id, specials, out)
    expect = {0: [np.inf, 0, np.nan, np.inf, 0], 1: [1, -1, np.nan, 1, -1], 2: [1, 0, np.nan, 1, 0]}[fn_id]
    np.testing.assert_array_equal(out, np.float32(expect))


# --- Add / Mul ---------------------------------------------------------------------------------------


def _reference_binary(op, xs, ys, dt, alpha):
    x, y = widen(xs, dt), widen(ys, dt)
    if dt in FLOATS:
        with np.errstate(all="ignore"):
            v = x + np.float32(alpha) * y if op == "add" else x * y
        return narrow(v, dt)
    with np.errstate(all="ignore"):
        v = x + np.int64(alpha) * y if op == "add" else x * y
    return v.astype(dt.numpy_dtype)


@PROPS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=4),
       dt=st.sampled_from(ARITH), op=st.sampled_from(["add", "mul"]), seed=SEEDS, layout=LAYOUTS,
       alpha=st.sampled_from([1, -2, 3]), special=st.booleans())
def test_add_mul_broadcast_match_numpy(shapes, dt, op, seed, layout, alpha, special):
    rng = np.random.default_rng(seed)
    (sa, sb), so = shapes.input_shapes, shapes.result_shape
    xs = laid_out(rng, random_storage(rng, sa, dt, special), layout)
    ys = random_storage(rng, sb, dt, special)
    out = laid_out(rng, np.zeros(so, dt.numpy_dtype), layout)
    if op == "add":
        K.add(xs, ys, alpha, out, dt)
    else:
        K.mul(xs, ys, out, dt)
    assert_bits_equal(out, _reference_binary(op, xs, ys, dt, alpha), dt)


def test_add_half_types_compute_in_float32_and_round_once():
    """fp16 65504 + 8 stays finite in float32 and rounds to 65504; 65504 + 16 rounds to inf."""
    x = np.float16([65504, 65504, 1.0])
    y = np.float16([8, 16, 2.0**-11])
    out = np.empty(3, np.float16)
    K.add(x, y, 1, out, "float16")
    assert out[0] == 65504 and np.isinf(out[1]) and out[2] == 1.0
    xb = float32_to_bf16(np.float32([1.0]))
    yb = float32_to_bf16(np.float32([2.0**-8]))
    ob = np.empty(1, np.uint16)
    K.add(xb, yb, 3, ob, "bf16")  # 1 + 3 * 2^-8 rounds (ties to even) to 1 + 2^-6 in bf16
    assert bf16_to_float32(ob)[0] == np.float32(1 + 2.0**-6)


def test_integer_add_wraps_and_needs_integral_alpha():
    x = np.int32([2**31 - 1, -(2**31)])
    out = np.empty(2, np.int32)
    K.add(x, np.int32([1, -1]), 1, out, I32)
    np.testing.assert_array_equal(out, [-(2**31), 2**31 - 1])
    with pytest.raises(InvalidArgumentError, match="alpha=0.5"):
        K.add(x, x, 0.5, out, I32)


def test_add_in_place_and_broadcast_errors():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    K.add(x, np.float32([10, 20, 30]), 1, x, F32)
    np.testing.assert_array_equal(x, [[10, 21, 32], [13, 24, 35]])
    with pytest.raises(InvalidArgumentError, match="do not broadcast"):
        K.add(x, np.zeros(2, np.float32), 1, x, F32)
    with pytest.raises(InvalidArgumentError, match="out shape"):
        K.add(x, x, 1, np.zeros((3, 2), np.float32), F32)
    with pytest.raises(InvalidArgumentError, match="read-only"):
        ro = np.zeros((2, 3), np.float32)
        ro.flags.writeable = False
        K.add(x, x, 1, ro, F32)


def test_storage_dtype_and_supported_dtype_are_checked():
    x = np.zeros(3, np.float32)
    with pytest.raises(InvalidArgumentError, match="stored as uint16"):
        K.add(x, x, 1, x, BF16)
    with pytest.raises(InvalidArgumentError, match="DT_DOUBLE is not supported"):
        K.mul(x.astype(np.float64), x.astype(np.float64), x.astype(np.float64), "float64")
    with pytest.raises(InvalidArgumentError, match="DT_INT32 is not supported"):
        K.sigmoid(np.zeros(3, np.int32), np.zeros(3, np.int32), I32)


# --- unary ---------------------------------------------------------------------------------------------


@PROPS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5), dt=st.sampled_from(ARITH),
       op=st.sampled_from(["abs", "relu"]), seed=SEEDS, layout=LAYOUTS)
def test_abs_relu_match_numpy(shape, dt, op, seed, layout):
    rng = np.random.default_rng(seed)
    xs = laid_out(rng, random_storage(rng, shape, dt, special=True), layout)
    out = np.zeros(shape, dt.numpy_dtype)
    (K.abs_ if op == "abs" else K.relu)(xs, out, dt)
    x = widen(xs, dt)
    with np.errstate(all="ignore"):
        ref = np.abs(x) if op == "abs" else np.where(x < 0, x.dtype.type(0), x)
    assert_bits_equal(out, narrow(ref, dt) if dt in FLOATS else ref.astype(dt.numpy_dtype), dt)


def test_abs_of_integer_minimum_wraps_and_relu_keeps_nan():
    out = np.empty(2, np.int64)
    K.abs_(np.int64([-(2**63), -5]), out, I64)
    np.testing.assert_array_equal(out, [-(2**63), 5])
    r = np.empty(3, np.float32)
    K.relu(np.float32([np.nan, -np.inf, 2]), r, F32)
    assert np.isnan(r[0]) and r[1] == 0 and r[2] == 2


@PROPS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6), dt=st.sampled_from(FLOATS),
       seed=SEEDS, layout=LAYOUTS)
def test_sigmoid_within_float32_error(shape, dt, seed, layout):
    rng = np.random.default_rng(seed)
    xs = laid_out(rng, random_storage(rng, shape, dt, scale=6.0), layout)
    out = np.zeros(shape, dt.numpy_dtype)
    K.sigmoid(xs, out, dt)
    ref = 1.0 / (1.0 + np.exp(-widen(xs, dt).astype(np.float64)))
    assert_close(out, ref, dt, 4e-7)


# --- Cast ----------------------------------------------------------------------------------------------


def _reference_cast(xs: np.ndarray, src: DataType, dst: DataType) -> np.ndarray:
    """numpy astype semantics, with NaN -> 0 and saturation for float -> int (documented in Cast)."""
    if src == dst:
        return xs.copy()
    if src in FLOATS:
        v = widen(xs, src)
        if dst in FLOATS:
            return narrow(v, dst)
        if dst == BOOL:
            return v != 0
        info = np.iinfo(dst.numpy_dtype)
        d = v.astype(np.float64)
        out = np.zeros(v.shape, np.int64)
        inside = (d >= info.min) & (d < float(info.max) + 1.0)
        out[inside] = np.trunc(d[inside]).astype(np.int64)
        out[d >= float(info.max) + 1.0] = info.max
        out[d < info.min] = info.min
        return out.astype(dst.numpy_dtype)
    v = widen(xs, src)
    if dst in FLOATS:
        return narrow(v.astype(np.float32), dst)
    if dst == BOOL:
        return v != 0
    return v.astype(dst.numpy_dtype)


@PROPS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5), src=st.sampled_from(ALL),
       dst=st.sampled_from(ALL), seed=SEEDS, layout=LAYOUTS, special=st.booleans())
def test_cast_matches_reference_for_every_pair(shape, src, dst, seed, layout, special):
    rng = np.random.default_rng(seed)
    xs = laid_out(rng, random_storage(rng, shape, src, special, scale=200.0), layout)
    out = np.zeros(shape, dst.numpy_dtype)
    K.cast(xs, out, src, dst)
    assert_bits_equal(out, _reference_cast(xs, src, dst), dst)


def test_cast_float_to_int_semantics():
    """Truncation toward zero as numpy; NaN -> 0 and saturation where numpy is undefined."""
    f = np.float32([2.9, -2.9, np.nan, np.inf, -np.inf, 3e9, -3e9, 2147483520.0, 255.9, -0.99])
    for dst, want in [(I32, [2, -2, 0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 2147483520, 255, 0]),
                      (I8, [2, -2, 0, 127, -128, 127, -128, 127, 127, 0]),
                      (U8, [2, 0, 0, 255, 0, 255, 0, 255, 255, 0]),
                      (I64, [2, -2, 0, 2**63 - 1, -(2**63), 3000000000, -3000000000, 2147483520, 255, 0])]:
        out = np.empty(f.shape, dst.numpy_dtype)
        K.cast(f, out, F32, dst)
        np.testing.assert_array_equal(out, np.array(want, dst.numpy_dtype), err_msg=dst.name)
    b = np.empty(3, np.bool_)
    K.cast(np.float32([np.nan, -0.0, 0.5]), b, F32, BOOL)
    np.testing.assert_array_equal(b, [True, False, True])


def test_cast_int_to_float_and_between_half_types():
    out = np.empty(3, np.float16)
    K.cast(np.int64([65519, 65520, -3]), out, I64, F16)
    np.testing.assert_array_equal(out, np.float16([65504, np.inf, -3]))
    bf = np.empty(1, np.uint16)
    K.cast(np.float16([1.0009765625]), bf, F16, BF16)  # 1 + 2^-10 is not a bf16: rounds to 1
    assert bf16_to_float32(bf)[0] == 1.0
    wrapped = np.empty(2, np.int8)
    K.cast(np.int64([300, -129]), wrapped, I64, I8)
    np.testing.assert_array_equal(wrapped, [44, 127])


# --- ReduceSum -----------------------------------------------------------------------------------------


@st.composite
def shape_and_axes(draw, max_dims=4):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=max_dims, min_side=0, max_side=5))
    axes = draw(st.lists(st.integers(-len(shape), len(shape) - 1), max_size=len(shape),
                         unique_by=lambda a: a % len(shape)))
    return shape, axes


@PROPS
@given(sa=shape_and_axes(), keepdims=st.booleans(), dt=st.sampled_from(ARITH), seed=SEEDS, layout=LAYOUTS)
def test_reduce_sum_matches_numpy(sa, keepdims, dt, seed, layout):
    shape, axes = sa
    rng = np.random.default_rng(seed)
    xs = laid_out(rng, random_storage(rng, shape, dt), layout)
    norm = tuple(sorted(a % len(shape) for a in axes)) or tuple(range(len(shape)))
    out = np.zeros(K.reduce_sum_shape(shape, axes, keepdims), dt.numpy_dtype)
    K.reduce_sum(xs, axes, keepdims, out, dt)
    if dt in FLOATS:
        x = widen(xs, dt).astype(np.float64)
        ref = np.sum(x, axis=norm, keepdims=keepdims)
        n_red = int(np.prod([shape[a] for a in norm]))
        # float32 summation error bound: (n - 1) units of 2^-24 of sum(|x|) (partial sums only tighten it)
        bound = 2.0**-24 * (n_red + 1) * np.sum(np.abs(x), axis=norm, keepdims=keepdims)
        assert_close(out, ref, dt, bound)
    else:
        ref = np.sum(widen(xs, dt), axis=norm, keepdims=keepdims).astype(dt.numpy_dtype)
        np.testing.assert_array_equal(out, ref)


def test_reduce_sum_half_accumulates_in_float32():
    """4096 ones in fp16: an fp16 accumulator would stop at 2048; float32 accumulation gives 4096."""
    x = np.ones(4096, np.float16)
    out = np.empty((), np.float16)
    K.reduce_sum(x, [0], False, out, F16)
    assert out == 4096
    ints = np.full(3, 2**31 - 1, np.int32)
    oi = np.empty((1,), np.int32)
    K.reduce_sum(ints, [0], True, oi, I32)  # int64 accumulation, wrapped once on store
    assert oi[0] == np.int32(np.int64(3 * (2**31 - 1)).astype(np.int32))


def test_reduce_sum_empty_axis_gives_zero_and_axes_are_validated():
    out = np.full((3,), 7, np.float32)
    K.reduce_sum(np.zeros((0, 3), np.float32), [0], False, out, F32)
    np.testing.assert_array_equal(out, 0)
    for dt in (F32, BF16, I64):  # a 0-d input: dim 0 / -1 is accepted and the sum is the element
        scalar = np.array(narrow(np.float32(3), dt) if dt in FLOATS else 3, dt.numpy_dtype)
        res = np.zeros((), dt.numpy_dtype)
        K.reduce_sum(scalar, [-1], False, res, dt)
        assert widen(res, dt) == 3
    with pytest.raises(InvalidArgumentError, match="more than once"):
        K.reduce_sum(np.zeros((2, 3), np.float32), [1, -1], False, np.zeros(2, np.float32), F32)
    with pytest.raises(InvalidArgumentError, match="out of range"):
        K.reduce_sum(np.zeros((2, 3), np.float32), [2], False, np.zeros(2, np.float32), F32)


# --- Softmax -------------------------------------------------------------------------------------------


@PROPS
@given(shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6), dt=st.sampled_from(FLOATS),
       seed=SEEDS, layout=LAYOUTS, dim_pick=st.integers(0, 100))
def test_softmax_matches_numpy(shape, dt, seed, layout, dim_pick):
    rng = np.random.default_rng(seed)
    dim = dim_pick % len(shape) - (len(shape) if dim_pick % 2 else 0)
    xs = laid_out(rng, random_storage(rng, shape, dt, scale=20.0), layout)
    out = laid_out(rng, np.zeros(shape, dt.numpy_dtype), layout)
    K.softmax(xs, dim, out, dt)
    x = widen(xs, dt).astype(np.float64)
    e = np.exp(x - x.max(axis=dim, keepdims=True)) if x.size else x
    ref = e / e.sum(axis=dim, keepdims=True) if x.size else x
    assert_close(out, ref, dt, 2e-6)


def test_softmax_is_stable_and_propagates_nan():
    out = np.empty((2, 3), np.float32)
    K.softmax(np.float32([[1000, 1000, -np.inf], [1, np.nan, 2]]), 1, out, F32)
    np.testing.assert_allclose(out[0], [0.5, 0.5, 0.0])
    assert np.isnan(out[1]).all()


# --- MatMul --------------------------------------------------------------------------------------------


@st.composite
def matmul_case(draw):
    m, k, n = (draw(st.integers(0, 6)) for _ in range(3))
    batched = draw(st.integers(0, 3))  # 0: 2-D x 2-D; 1: 3-D x 3-D; 2: 3-D x 2-D; 3: batch 1 broadcast
    b = draw(st.integers(0, 3))
    ts, tm = draw(st.booleans()), draw(st.booleans())
    sa = (k, m) if ts else (m, k)
    sb = (n, k) if tm else (k, n)
    if batched == 1:
        sa, sb = (b,) + sa, (b,) + sb
    elif batched == 2:
        sa = (b,) + sa
    elif batched == 3:
        sa, sb = (1,) + sa, (b,) + sb
    return sa, sb, ts, tm


def _reference_matmul(a, b, ts, tm):
    a = np.swapaxes(a, -1, -2) if ts else a
    b = np.swapaxes(b, -1, -2) if tm else b
    return np.matmul(a, b), np.matmul(np.abs(a), np.abs(b))


@PROPS
@given(case=matmul_case(), dt=st.sampled_from(FLOATS), seed=SEEDS)
def test_matmul_matches_numpy(case, dt, seed):
    sa, sb, ts, tm = case
    rng = np.random.default_rng(seed)
    xa, xb = random_storage(rng, sa, dt), random_storage(rng, sb, dt)
    out = np.zeros(K.matmul_shape(sa, sb, ts, tm), dt.numpy_dtype)
    K.matmul(xa, xb, out, dt, transpose_self=ts, transpose_mat2=tm)
    ref, mag = _reference_matmul(widen(xa, dt).astype(np.float64), widen(xb, dt).astype(np.float64), ts, tm)
    assert_close(out, ref, dt, 1e-6 * mag * (1 + sa[-1]))


def _activation(v, act):
    if act == "relu":
        return np.maximum(v, 0)
    if act == "gelu_tanh":
        return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))
    return v


@PROPS
@given(case=matmul_case(), dt=st.sampled_from(FLOATS), seed=SEEDS, act=st.sampled_from(sorted(K.ACTIVATIONS)),
       with_bias=st.booleans())
def test_matmul_bias_activation_matches_numpy(case, dt, seed, act, with_bias):
    sa, sb, ts, tm = case
    rng = np.random.default_rng(seed)
    xa, xb = random_storage(rng, sa, dt), random_storage(rng, sb, dt)
    shape = K.matmul_shape(sa, sb, ts, tm)
    bias = random_storage(rng, shape[-1:], dt) if with_bias else None
    out = np.zeros(shape, dt.numpy_dtype)
    K.matmul_bias_act(xa, xb, bias, out, dt, act, transpose_self=ts, transpose_mat2=tm)
    ref, mag = _reference_matmul(widen(xa, dt).astype(np.float64), widen(xb, dt).astype(np.float64), ts, tm)
    if with_bias:
        ref = ref + widen(bias, dt)
    # the activations are 1.2-Lipschitz, so the float32 error bound carries over
    assert_close(out, _activation(ref, act), dt, 1.2e-6 * (mag * (1 + sa[-1]) + 1 + np.abs(ref)))


def test_matmul_shape_errors():
    with pytest.raises(InvalidArgumentError, match="K=3.*K=4"):
        K.matmul(np.zeros((2, 3), np.float32), np.zeros((4, 5), np.float32), np.zeros((2, 5), np.float32), F32)
    with pytest.raises(InvalidArgumentError, match="do not broadcast"):
        K.matmul(np.zeros((2, 2, 3), np.float32), np.zeros((3, 3, 5), np.float32), np.zeros((2, 2, 5), np.float32),
                 F32)
    with pytest.raises(InvalidArgumentError, match="activation='gelu'"):
        K.matmul_bias_act(np.zeros((2, 3), np.float32), np.zeros((3, 5), np.float32), None,
                          np.zeros((2, 5), np.float32), F32, "gelu")


# --- Pad -----------------------------------------------------------------------------------------------


@st.composite
def pad_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4))
    pads = [(draw(st.integers(-n, 3)), draw(st.integers(-n, 3))) for n in shape]
    pads = [(b, max(e, -(n + b))) for (b, e), n in zip(pads, shape)]  # never crop below zero
    return shape, pads


@PROPS
@given(case=pad_case(), dt=st.sampled_from(ALL), seed=SEEDS, layout=LAYOUTS, value=st.sampled_from([0, 1.5, -3]))
def test_pad_matches_numpy(case, dt, seed, layout, value):
    shape, pads = case
    rng = np.random.default_rng(seed)
    xs = laid_out(rng, random_storage(rng, shape, dt), layout)
    out = np.zeros(K.pad_shape(shape, pads), dt.numpy_dtype)
    K.pad(xs, pads, value, out, dt)
    fill = _reference_cast(np.array([value], np.float32), F32, dt)[0] if dt in FLOATS or value == 1.5 else \
        _reference_cast(np.array([value], np.int64), I64, dt)[0]
    ref = np.pad(xs, [(max(b, 0), max(e, 0)) for b, e in pads], constant_values=fill)
    crop = tuple(slice(max(-b, 0), ref.shape[d] - max(-e, 0)) for d, (b, e) in enumerate(pads))
    assert_bits_equal(out, ref[crop], dt)


def test_pad_value_follows_cast_and_paddings_are_checked():
    out = np.empty((1, 4), np.uint16)
    K.pad(float32_to_bf16(np.float32([[1, 2]])), [(0, 0), (1, 1)], 1.00390625, out, BF16)
    np.testing.assert_array_equal(bf16_to_float32(out), [[1, 1, 2, 1]])
    with pytest.raises(InvalidArgumentError, match="pairs"):
        K.pad(np.zeros((2, 2), np.int32), [(1, 1)], 0, np.zeros((4, 2), np.int32), I32)


# --- IndexPut ------------------------------------------------------------------------------------------


@st.composite
def index_put_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    k = draw(st.integers(1, len(shape)))
    b_shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=k, min_dims=0, max_dims=2, min_side=0, max_side=4))
    sel = b_shapes.result_shape + tuple(shape[k:])
    v_drop = draw(st.integers(0, len(sel)))
    v_shape = tuple(1 if draw(st.booleans()) else n for n in sel[v_drop:])
    return shape, k, b_shapes.input_shapes, v_shape


def _reference_index_put(xs, idx, vs, accumulate, dt):
    ref = xs.copy()
    if not accumulate:
        ref[tuple(idx)] = vs
        return ref
    b_shape = np.broadcast_shapes(*(i.shape for i in idx))
    flat_idx = [np.broadcast_to(i, b_shape).reshape(-1) for i in idx]
    sel = b_shape + xs.shape[len(idx):]
    vals = np.broadcast_to(vs, sel).reshape((-1,) + xs.shape[len(idx):])
    for b in range(len(flat_idx[0]) if flat_idx else 0):
        pos = tuple(int(i[b]) for i in flat_idx)
        cur = np.asarray(ref[pos])
        with np.errstate(all="ignore"):
            total = widen(cur, dt) + widen(np.asarray(vals[b]), dt)
        ref[pos] = narrow(total, dt) if dt in FLOATS else (total != 0 if dt == BOOL else total.astype(dt.numpy_dtype))
    return ref


@PROPS
@given(case=index_put_case(), dt=st.sampled_from(ALL), seed=SEEDS, accumulate=st.booleans(),
       in_place=st.booleans(), layout=LAYOUTS)
def test_index_put_matches_numpy(case, dt, seed, accumulate, in_place, layout):
    shape, k, b_shapes, v_shape = case
    rng = np.random.default_rng(seed)
    xs = laid_out(rng, random_storage(rng, shape, dt), layout)
    idx = [rng.integers(-shape[d], shape[d], size=b_shapes[d]).astype(np.int64 if d % 2 else np.int32)
           for d in range(k)]
    vs = random_storage(rng, v_shape, dt)
    ref = _reference_index_put(xs, idx, vs, accumulate, dt)
    out = xs if in_place else np.zeros(shape, dt.numpy_dtype)
    K.index_put(xs, idx, vs, accumulate, out, dt)
    assert_bits_equal(out, ref, dt)


def test_index_put_accumulates_duplicates_and_rejects_bad_indices():
    x = np.zeros((3, 2), np.float32)
    K.index_put(x, [np.int64([1, 1, -2, 0])], np.float32([[1, 2]]), True, x, F32)
    np.testing.assert_array_equal(x, [[1, 2], [3, 6], [0, 0]])
    out = np.full((3, 2), 9, np.float32)
    with pytest.raises(InvalidArgumentError, match="index 3 in indices\\[0\\] is out of bounds"):
        K.index_put(x, [np.int64([0, 3])], np.float32([1]), False, out, F32)
    assert (out == 9).all()  # nothing written before the check
    with pytest.raises(InvalidArgumentError, match="int64 or int32"):
        K.index_put(x, [np.float32([0])], np.float32([1]), False, x, F32)


# --- NonZero -------------------------------------------------------------------------------------------


@PROPS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5), dt=st.sampled_from(ALL),
       seed=SEEDS, layout=LAYOUTS)
def test_non_zero_matches_argwhere(shape, dt, seed, layout):
    rng = np.random.default_rng(seed)
    xs = random_storage(rng, shape, dt, special=True)
    if dt not in FLOATS and dt != BOOL:
        xs = np.where(rng.random(shape) < 0.5, 0, xs).astype(dt.numpy_dtype)
    xs = laid_out(rng, xs, layout)
    out = np.full((xs.size, xs.ndim), -1, np.int64)
    count = K.non_zero(xs, out, dt)
    ref = np.argwhere(widen(xs, dt) != 0)
    assert count == len(ref) == K.count_non_zero(xs, dt)
    np.testing.assert_array_equal(out[:count], ref)


def test_non_zero_treats_negative_zero_as_zero_and_nan_as_non_zero():
    bits = float32_to_bf16(np.float32([-0.0, np.nan, 0.0, 1.0]))
    out = np.full((4, 1), -1, np.int64)
    assert K.non_zero(bits, out, BF16) == 2
    np.testing.assert_array_equal(out[:2, 0], [1, 3])
    with pytest.raises(InvalidArgumentError, match="do not fit"):
        K.non_zero(np.float32([1.0]), np.empty((0, 1), np.int64), F32)


# --- RmsNorm / AddRmsNorm ------------------------------------------------------------------------------


@st.composite
def norm_case(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=6))
    g = draw(st.integers(1, len(shape)))
    return shape, g


def _reference_rms(x64, g, gamma64, eps):
    axes = tuple(range(x64.ndim - g, x64.ndim))
    rstd = 1.0 / np.sqrt(np.mean(x64 * x64, axis=axes, keepdims=True) + eps) if x64.size else x64
    return x64 * rstd * gamma64, rstd


@PROPS
@given(case=norm_case(), dt=st.sampled_from(FLOATS), seed=SEEDS, layout=LAYOUTS, add=st.booleans(),
       keep_rstd_dims=st.booleans())
def test_rms_norm_and_add_rms_norm_match_numpy(case, dt, seed, layout, add, keep_rstd_dims):
    shape, g = case
    rng = np.random.default_rng(seed)
    eps = 1e-6
    x1 = laid_out(rng, random_storage(rng, shape, dt), layout)
    x2 = random_storage(rng, shape, dt)
    gamma = random_storage(rng, shape[len(shape) - g:], dt)
    lead = shape[:len(shape) - g]
    rstd = np.zeros(lead + (1,) * g if keep_rstd_dims else lead, np.float32)
    y = np.zeros(shape, dt.numpy_dtype)
    if add:
        x_out = np.zeros(shape, dt.numpy_dtype)
        K.add_rms_norm(x1, x2, gamma, eps, y, rstd, x_out, dt)
        assert_bits_equal(x_out, narrow(widen(x1, dt) + widen(x2, dt), dt), dt)
        x = widen(x_out, dt).astype(np.float64)
    else:
        K.rms_norm(x1, gamma, eps, y, rstd, dt)
        x = widen(x1, dt).astype(np.float64)
    ref_y, ref_rstd = _reference_rms(x, g, widen(gamma, dt).astype(np.float64), eps)
    n_row = int(np.prod(shape[len(shape) - g:]))
    rel = 2.0**-24 * (n_row + 8)  # float32 sum of squares, mean, sqrt, divide, two products
    assert_close(y, ref_y, dt, rel * np.abs(ref_y))
    if x.size:
        np.testing.assert_allclose(rstd.reshape(-1), ref_rstd.reshape(-1), rtol=rel, atol=0)


def test_rms_norm_checks_gamma_and_rstd_shapes():
    x = np.ones((2, 4), np.float32)
    with pytest.raises(InvalidArgumentError, match="gamma shape"):
        K.rms_norm(x, np.ones(3, np.float32), 1e-6, np.empty_like(x), np.empty(2, np.float32), F32)
    with pytest.raises(InvalidArgumentError, match="rstd shape"):
        K.rms_norm(x, np.ones(4, np.float32), 1e-6, np.empty_like(x), np.empty(4, np.float32), F32)
    with pytest.raises(InvalidArgumentError, match="stored as float32"):
        K.rms_norm(x, np.ones(4, np.float32), 1e-6, np.empty_like(x), np.empty(2, np.float16), F32)


# --- non-finite check ------------------------------------------------------------------------------------


@PROPS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6), dt=st.sampled_from(ALL),
       seed=SEEDS, layout=LAYOUTS, special=st.booleans())
def test_has_non_finite_matches_isfinite(shape, dt, seed, layout, special):
    rng = np.random.default_rng(seed)
    xs = laid_out(rng, random_storage(rng, shape, dt, special), layout)
    want = bool(dt in FLOATS and not np.isfinite(widen(xs, dt)).all())
    assert K.has_non_finite(xs, dt) is want


def test_has_non_finite_detects_half_overflow():
    assert K.has_non_finite(np.float16([1, 2, np.inf]), F16)
    assert not K.has_non_finite(np.float16([65504]), "float16")
    assert K.has_non_finite(np.uint16([0x7F80]), BF16) and not K.has_non_finite(np.uint16([0x7F7F]), BF16)


def test_registry_names_l0_ops():
    assert K.KERNELS["Add"] is K.add and K.KERNELS["NonFiniteCheck"] is K.has_non_finite
    assert {"Mul", "Abs", "Relu", "Sigmoid", "Cast", "ReduceSum", "SoftmaxV2", "MatMul", "BatchMatMul",
            "FusedMatMul", "PadV3", "IndexPutV2", "NonZero", "RmsNorm", "AddRmsNorm"} <= set(K.KERNELS)
