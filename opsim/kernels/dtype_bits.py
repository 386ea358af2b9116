"""How numerics kernels read and write storage elements: kernel views, half-float conversions, load/store.

A kernel is specialized by Numba on its arrays' element types, and `load` / `store` are generic over them,
so the same kernel source serves every dtype with no per-element dtype branches. numpy (and Numba) have no
float16 scalar type on the CPU and no bfloat16 at all, so `kernel_view` hands half floats over as integer
bit patterns, told apart by signedness: **float16 as int16, bfloat16 as uint16**. No kernel here accepts
DT_INT16 or DT_UINT16, so the two tags cannot be confused.

Value semantics, shared by every kernel:
- Floating dtypes compute in float32 (float16/bfloat16 widen exactly and round to nearest even on store, as an
  NPU vector unit does). Integer dtypes compute in int64 and wrap (two's complement) on store, like numpy.
- Float -> integer stores truncate toward zero (numpy's astype for every in-range value). NaN stores as 0 and
  values beyond the target range saturate to its min/max: numpy leaves those cases undefined (x86 gives
  INT_MIN) while the NPU's conversion units saturate, and a simulator must be deterministic.
- Float -> bool is `value != 0` (NaN is True); bool -> number is 0/1.
- A NaN stored as bfloat16 becomes 0x7FC0 (as `opsim.acl.dtypes.float32_to_bf16` does).
"""
from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import config
from numba.core.codegen import get_host_cpu_features
from numba.extending import intrinsic, overload

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError

FLOAT_TYPES = frozenset({DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16})
#: The dtypes arithmetic kernels (Add, Mul, ReduceSum, ...) accept.
ARITH_TYPES = FLOAT_TYPES | {DataType.DT_INT32, DataType.DT_INT64}
#: Every dtype the numerics kernels know (Cast, Pad, IndexPut, NonZero accept all of them).
ALL_TYPES = ARITH_TYPES | {DataType.DT_INT8, DataType.DT_UINT8, DataType.DT_BOOL}

#: The element type a kernel sees for each dtype (half floats as bit patterns, see the module docstring).
KERNEL_DTYPE: dict[DataType, np.dtype] = {
    DataType.DT_FLOAT: np.dtype(np.float32), DataType.DT_FLOAT16: np.dtype(np.int16),
    DataType.DT_BF16: np.dtype(np.uint16), DataType.DT_INT32: np.dtype(np.int32),
    DataType.DT_INT64: np.dtype(np.int64), DataType.DT_INT8: np.dtype(np.int8),
    DataType.DT_UINT8: np.dtype(np.uint8), DataType.DT_BOOL: np.dtype(np.bool_),
}


def check_dtype(dtype: "DataType | str | int", allowed: frozenset, op: str, field: str = "dtype") -> DataType:
    """Parse a dtype tag and reject one the op does not implement (names the op, the field and the choices)."""
    dt = DataType.parse(dtype)
    if dt not in allowed:
        names = ", ".join(sorted(d.name for d in allowed))
        raise InvalidArgumentError(f"{op}: {field}={dt.name} is not supported; supported: {names}")
    return dt


def kernel_view(arr: np.ndarray, dtype: DataType, op: str, name: str) -> np.ndarray:
    """`arr` as its kernel element type (see KERNEL_DTYPE), after checking it holds `dtype`'s storage."""
    if not isinstance(arr, np.ndarray):
        raise InvalidArgumentError(f"{op}: {name} must be a numpy array, got {type(arr).__name__}")
    want = dtype.numpy_dtype
    if arr.dtype != want:
        raise InvalidArgumentError(
            f"{op}: {name} has numpy dtype {arr.dtype}, but {dtype.name} is stored as {want}; "
            f"pass the storage array (bf16 as uint16 bit patterns) or fix the dtype tag")
    kdt = KERNEL_DTYPE[dtype]
    return arr if kdt == want else arr.view(kdt)


# --- bit casts ---------------------------------------------------------------------------------------
@intrinsic
def u32_as_f32(typingctx, bits):
    """Reinterpret uint32 bits as a float32 (no conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@intrinsic
def f32_as_u32(typingctx, value):
    """Reinterpret a float32 as its uint32 bits."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


# --- float16 -----------------------------------------------------------------------------------------
@intrinsic
def _f16_to_f32_hw(typingctx, bits):
    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _f32_to_f16_hw(typingctx, value):
    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(types.float32), codegen


@njit(cache=True)
def f16_to_f32_soft(h):
    """float16 bits -> float32, exactly (integer bit manipulation; for targets without F16C)."""
    h = np.uint32(h)
    o = (h & np.uint32(0x7FFF)) << np.uint32(13)
    exp = o & np.uint32(0x0F800000)
    o += np.uint32(112 << 23)  # rebias 15 -> 127
    if exp == np.uint32(0x0F800000):  # inf / nan: exponent all ones
        o += np.uint32(112 << 23)
    elif exp == 0:  # zero / subnormal: renormalize through a float subtraction
        o += np.uint32(1 << 23)
        o = f32_as_u32(u32_as_f32(o) - u32_as_f32(np.uint32(113 << 23)))
    return u32_as_f32(o | ((h & np.uint32(0x8000)) << np.uint32(16)))


@njit(cache=True)
def f32_to_f16_soft(value):
    """float32 -> float16 bits, round to nearest even, overflow to inf, NaN to a quiet NaN (as numpy)."""
    u = f32_as_u32(value)
    sign = u & np.uint32(0x80000000)
    u ^= sign
    if u >= np.uint32(143 << 23):  # >= 65520 rounds to inf; inf stays inf, NaN becomes quiet NaN
        o = np.uint32(0x7E00) if u > np.uint32(0x7F800000) else np.uint32(0x7C00)
    elif u < np.uint32(113 << 23):  # below the smallest normal half: the float adder does the rounding
        o = f32_as_u32(u32_as_f32(u) + u32_as_f32(np.uint32(126 << 23))) - np.uint32(126 << 23)
    else:
        mant_odd = (u >> np.uint32(13)) & np.uint32(1)
        u += np.uint32(0xC8000FFF)  # rebias 127 -> 15 (mod 2**32) and add the rounding bias 0xFFF
        u += mant_odd
        o = u >> np.uint32(13)
    return np.uint16(o | (sign >> np.uint32(16)))


def _target_converts_half() -> bool:
    """Whether the CPU Numba compiles for converts half floats in hardware (x86 F16C).

    Without it LLVM lowers `fpext half` to a runtime-library call Numba does not link, so the integer
    version is used instead. Mirrors how Numba picks its target (NUMBA_CPU_NAME / NUMBA_CPU_FEATURES).
    """
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    return "+f16c" in str(features).split(",")


HARDWARE_HALF = _target_converts_half()
#: float16 bits <-> float32 as used by every kernel (F16C instructions where available: ~10x faster).
f16_to_f32 = _f16_to_f32_hw if HARDWARE_HALF else f16_to_f32_soft
f32_to_f16 = _f32_to_f16_hw if HARDWARE_HALF else f32_to_f16_soft


# --- bfloat16 ----------------------------------------------------------------------------------------
@njit(cache=True)
def bf16_to_f32(h):
    """bfloat16 bits -> float32 (exact)."""
    return u32_as_f32(np.uint32(h) << np.uint32(16))


@njit(cache=True)
def f32_to_bf16(value):
    """float32 -> bfloat16 bits, round to nearest even; NaN -> 0x7FC0."""
    if value != value:
        return np.uint16(0x7FC0)
    u = f32_as_u32(value)
    return np.uint16((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))


# --- generic load / store -----------------------------------------------------------------------------
def load(x):
    """Kernel element -> compute value: float32 for floating storage, int64 for integers and bool.

    Numba-only generic (resolved per element type at compile time by the overload below)."""
    raise TypeError("load() is only callable inside Numba kernels")


def store(value, out):
    """Compute value (float32 or int64) -> the element to write into array `out` (rounded, wrapped or
    saturated as the module docstring says). Numba-only generic."""
    raise TypeError("store() is only callable inside Numba kernels")


def compute_zero(arr):
    """The zero of `arr`'s compute type (float32 or int64): the start value of accumulators. Numba-only."""
    raise TypeError("compute_zero() is only callable inside Numba kernels")


def _is_compute_float(dtype) -> bool:
    return isinstance(dtype, types.Float) or dtype == types.int16 or dtype == types.uint16


@overload(load)
def _load_impl(x):
    if x == types.float32:
        return lambda x: x
    if x == types.int16:
        return lambda x: f16_to_f32(np.uint16(x))
    if x == types.uint16:
        return lambda x: bf16_to_f32(x)
    if isinstance(x, (types.Integer, types.Boolean)):
        return lambda x: np.int64(x)
    return None


@overload(compute_zero)
def _compute_zero_impl(arr):
    if _is_compute_float(arr.dtype):
        return lambda arr: np.float32(0.0)
    return lambda arr: np.int64(0)


@overload(store)
def _store_impl(value, out):
    dt = out.dtype
    if dt == types.float32:
        return lambda value, out: np.float32(value)
    if dt == types.int16:
        return lambda value, out: np.int16(f32_to_f16(np.float32(value)))
    if dt == types.uint16:
        return lambda value, out: f32_to_bf16(np.float32(value))
    if isinstance(dt, types.Boolean):
        return lambda value, out: value != 0
    if not isinstance(dt, types.Integer):
        return None
    elem = np.dtype(str(dt)).type
    if not isinstance(value, types.Float):
        return lambda value, out: elem(value)  # integer -> integer wraps
    info = np.iinfo(elem)
    lo, hi_excl, lo_i, hi_i = float(info.min), float(info.max) + 1.0, int(info.min), int(info.max)

    def saturate(value, out):
        if value != value:
            return elem(0)
        d = np.float64(value)
        if d >= hi_excl:
            return elem(hi_i)
        if d < lo:
            return elem(lo_i)
        return elem(np.int64(d))  # in range: truncation toward zero
    return saturate
