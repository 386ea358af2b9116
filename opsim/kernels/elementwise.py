"""Elementwise numerics: Add, Mul, Abs, Relu, Sigmoid and Cast.

Each public function takes storage arrays (bf16 as uint16 bit patterns), writes into a preallocated `out`
(outputs live at planned device addresses) and returns nothing. Every op is one Numba pass: broadcasting,
alpha and the half-float widening/rounding happen inside the same loop (see dtype_bits for the value
semantics and strided for how any layout becomes rows). Casts between integer types are numpy's astype,
which has the same semantics and is faster. `out` may be the very same memory as an input
(in-place); partially overlapping views are not supported, as on the device.
"""
from __future__ import annotations

import numpy as np
from numba import njit, uintp

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError
from opsim.kernels.dtype_bits import (ALL_TYPES, ARITH_TYPES, FLOAT_TYPES, check_dtype, compute_zero, kernel_view,
                                      load, store)
from opsim.kernels.mathf32 import sigmoid_f32
from opsim.kernels.strided import broadcast_shape, broadcast_strides, element_strides, plan_operands

OP_ADD = 0
OP_MUL = 1

OP_ABS = 0
OP_RELU = 1
OP_SIGMOID = 2


# --- kernels -----------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _binary_kernel(a, b, out, starts, inner, steps, op, alpha):
    """out = a + alpha*b (op 0) or a * b (op 1), row by row (alpha is float32 or int64, the compute type)."""
    sa, sb, so = uintp(steps[0]), uintp(steps[1]), uintp(steps[2])
    n = uintp(inner)
    for r in range(starts.shape[1]):
        pa, pb, po = uintp(starts[0, r]), uintp(starts[1, r]), uintp(starts[2, r])
        if op == OP_ADD:
            for j in range(n):
                out[po + j * so] = store(load(a[pa + j * sa]) + alpha * load(b[pb + j * sb]), out)
        else:
            for j in range(n):
                out[po + j * so] = store(load(a[pa + j * sa]) * load(b[pb + j * sb]), out)


@njit(cache=True, error_model="numpy")
def _abs_relu_kernel(a, out, starts, inner, steps, op):
    """out = abs(a) (op 0) or relu(a) (op 1), row by row, in the compute type (float32 or int64)."""
    sa, so = uintp(steps[0]), uintp(steps[1])
    n = uintp(inner)
    zero = compute_zero(a)
    for r in range(starts.shape[1]):
        pa, po = uintp(starts[0, r]), uintp(starts[1, r])
        if op == OP_ABS:
            for j in range(n):
                x = load(a[pa + j * sa])
                out[po + j * so] = store(abs(x), out)  # fabs for floats; int minimum wraps to itself, as numpy
        else:
            for j in range(n):
                x = load(a[pa + j * sa])
                out[po + j * so] = store(zero if x < zero else x, out)  # NaN passes through, as torch.relu


@njit(cache=True, error_model="numpy")
def _sigmoid_kernel(a, out, starts, inner, steps):
    """out = 1 / (1 + exp(-a)) in float32, row by row (floating storage only)."""
    sa, so = uintp(steps[0]), uintp(steps[1])
    n = uintp(inner)
    for r in range(starts.shape[1]):
        pa, po = uintp(starts[0, r]), uintp(starts[1, r])
        for j in range(n):
            out[po + j * so] = store(sigmoid_f32(load(a[pa + j * sa])), out)


@njit(cache=True, error_model="numpy")
def _cast_kernel(a, out, starts, inner, steps):
    """out = a converted to out's dtype (through float32 from floats, through int64 from integers)."""
    sa, so = uintp(steps[0]), uintp(steps[1])
    n = uintp(inner)
    for r in range(starts.shape[1]):
        pa, po = uintp(starts[0, r]), uintp(starts[1, r])
        for j in range(n):
            out[po + j * so] = store(load(a[pa + j * sa]), out)


# --- wrappers ----------------------------------------------------------------------------------------
def _binary(op_name: str, op: int, self: np.ndarray, other: np.ndarray, out: np.ndarray,
            dtype: "DataType | str", alpha: float | int) -> None:
    dt = check_dtype(dtype, ARITH_TYPES, op_name)
    a = kernel_view(self, dt, op_name, "self")
    b = kernel_view(other, dt, op_name, "other")
    o = kernel_view(out, dt, op_name, "out")
    shape = broadcast_shape(op_name, a.shape, b.shape)
    if o.shape != shape:
        raise InvalidArgumentError(
            f"{op_name}: out shape {list(o.shape)} must equal the broadcast shape {list(shape)} of self and other")
    if dt in FLOAT_TYPES:
        alpha_c = np.float32(alpha)
    else:
        if isinstance(alpha, (float, np.floating)) and not float(alpha).is_integer():
            raise InvalidArgumentError(f"{op_name}: alpha={alpha} must be an integer for {dt.name} inputs")
        alpha_c = np.int64(int(alpha))
    if o.size == 0:
        return
    sa = None if a.shape == shape else broadcast_strides(a.shape, element_strides(a), shape, op_name, "self")
    sb = None if b.shape == shape else broadcast_strides(b.shape, element_strides(b), shape, op_name, "other")
    (fa, fb, fo), plan = plan_operands(shape, [(a, sa, False), (b, sb, False), (o, None, True)])
    _binary_kernel(fa, fb, fo, plan.starts, plan.inner, plan.steps, op, alpha_c)


def add(self: np.ndarray, other: np.ndarray, alpha: float | int, out: np.ndarray,
        dtype: "DataType | str") -> None:
    """out = self + alpha * other with numpy broadcasting (aclnnAdd's L0 Add, inputs already promoted).

    Floats compute in float32 (half types round once on store); integers in int64 and wrap; an integer
    dtype needs an integral alpha.
    """
    _binary("Add", OP_ADD, self, other, out, dtype, alpha)


def mul(self: np.ndarray, other: np.ndarray, out: np.ndarray, dtype: "DataType | str") -> None:
    """out = self * other with numpy broadcasting (L0 Mul)."""
    _binary("Mul", OP_MUL, self, other, out, dtype, 1)


def _unary(op_name: str, op: int, allowed: frozenset, self: np.ndarray, out: np.ndarray,
           dtype: "DataType | str") -> None:
    dt = check_dtype(dtype, allowed, op_name)
    a = kernel_view(self, dt, op_name, "self")
    o = kernel_view(out, dt, op_name, "out")
    if o.shape != a.shape:
        raise InvalidArgumentError(f"{op_name}: out shape {list(o.shape)} must equal self shape {list(a.shape)}")
    if o.size == 0:
        return
    (fa, fo), plan = plan_operands(a.shape, [(a, None, False), (o, None, True)])
    if op == OP_SIGMOID:  # its own kernel: it has no integer form for Numba to type
        _sigmoid_kernel(fa, fo, plan.starts, plan.inner, plan.steps)
    else:
        _abs_relu_kernel(fa, fo, plan.starts, plan.inner, plan.steps, op)


def abs_(self: np.ndarray, out: np.ndarray, dtype: "DataType | str") -> None:
    """out = |self| (L0 Abs). Integer minimum values wrap to themselves, as in numpy."""
    _unary("Abs", OP_ABS, ARITH_TYPES, self, out, dtype)


def relu(self: np.ndarray, out: np.ndarray, dtype: "DataType | str") -> None:
    """out = max(self, 0) (L0 Relu); NaN stays NaN."""
    _unary("Relu", OP_RELU, ARITH_TYPES, self, out, dtype)


def sigmoid(self: np.ndarray, out: np.ndarray, dtype: "DataType | str") -> None:
    """out = 1 / (1 + exp(-self)) in float32 (L0 Sigmoid; floating dtypes only)."""
    _unary("Sigmoid", OP_SIGMOID, FLOAT_TYPES, self, out, dtype)


def cast(self: np.ndarray, out: np.ndarray, src_dtype: "DataType | str", dst_dtype: "DataType | str") -> None:
    """out = self converted from src_dtype to dst_dtype (L0 Cast) over float32/float16/bf16/int32/int64/
    int8/uint8/bool.

    Numeric semantics follow numpy's astype: float -> float rounds to nearest even, int -> int wraps,
    float -> int truncates toward zero, x -> bool is x != 0. Where numpy is undefined the NPU's saturating
    conversion is used instead: NaN -> int gives 0 and out-of-range floats clamp to the integer range.
    int -> bfloat16 rounds through float32.
    """
    src = check_dtype(src_dtype, ALL_TYPES, "Cast", "src_dtype")
    dst = check_dtype(dst_dtype, ALL_TYPES, "Cast", "dst_dtype")
    a = kernel_view(self, src, "Cast", "self")
    o = kernel_view(out, dst, "Cast", "out")
    if o.shape != a.shape:
        raise InvalidArgumentError(f"Cast: out shape {list(o.shape)} must equal self shape {list(a.shape)}")
    if o.size == 0:
        return
    if src not in FLOAT_TYPES and dst not in FLOAT_TYPES:
        # integer/bool <-> integer/bool (and plain copies): numpy's astype has exactly these semantics and
        # benchmarks/numerics.py measures it faster than the Numba loop
        np.copyto(out, self, casting="unsafe")
        return
    if src == dst:
        np.copyto(o, a)  # a plain copy: numpy's strided memcpy is the fastest way to move bits
        return
    (fa, fo), plan = plan_operands(a.shape, [(a, None, False), (o, None, True)])
    _cast_kernel(fa, fo, plan.starts, plan.inner, plan.steps)
