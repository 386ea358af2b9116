"""MatMul / BatchMatMul and the fused MatMul + bias + activation.

The products themselves go to numpy's matmul (BLAS sgemm, float32 accumulation): benchmarks/numerics.py
measures a straightforward Numba triple loop at many times slower, so no Numba matmul kernel is kept. Half
types are widened to float32 by the Numba Cast kernel, multiplied in float32 and rounded once on store. The
fused epilogue (bias, activation, rounding) is a single Numba pass over the float32 product.
"""
from __future__ import annotations

import numpy as np
from numba import njit, uintp

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError
from opsim.kernels.dtype_bits import FLOAT_TYPES, check_dtype, kernel_view, load, store
from opsim.kernels.elementwise import cast
from opsim.kernels.mathf32 import tanh_f32
from opsim.kernels.strided import broadcast_strides, element_strides, plan_operands

ACT_NONE = 0
ACT_RELU = 1
ACT_GELU_TANH = 2
#: Activation names accepted by matmul_bias_act.
ACTIVATIONS = {"none": ACT_NONE, "relu": ACT_RELU, "gelu_tanh": ACT_GELU_TANH}

_SQRT_2_OVER_PI = np.float32(0.7978845608028654)
_GELU_C = np.float32(0.044715)


@njit(cache=True, error_model="numpy")
def _bias_act_kernel(acc, bias, out, starts, inner, steps, act, has_bias):
    """out = act(acc + bias) with acc float32, computed in float32 and rounded on store."""
    sc, sb, so = uintp(steps[0]), uintp(steps[1]), uintp(steps[2])
    n = uintp(inner)
    zero, half, one = np.float32(0.0), np.float32(0.5), np.float32(1.0)
    for r in range(starts.shape[1]):
        pc, pb, po = uintp(starts[0, r]), uintp(starts[1, r]), uintp(starts[2, r])
        for j in range(n):
            v = acc[pc + j * sc]
            if has_bias:
                v += load(bias[pb + j * sb])
            if act == ACT_RELU:
                v = zero if v < zero else v
            elif act == ACT_GELU_TANH:
                v = half * v * (one + tanh_f32(_SQRT_2_OVER_PI * (v + _GELU_C * v * v * v)))
            out[po + j * so] = store(v, out)


def matmul_shape(self_shape: tuple[int, ...], mat2_shape: tuple[int, ...], transpose_self: bool = False,
                 transpose_mat2: bool = False) -> tuple[int, ...]:
    """Output shape of a (batched) matmul of 2-D or 3-D operands; batch dims broadcast (1 against B)."""
    if len(self_shape) not in (2, 3) or len(mat2_shape) not in (2, 3):
        raise InvalidArgumentError(f"MatMul: self {list(self_shape)} and mat2 {list(mat2_shape)} must be 2-D or 3-D")
    m, k = (self_shape[-1], self_shape[-2]) if transpose_self else (self_shape[-2], self_shape[-1])
    k2, n = (mat2_shape[-1], mat2_shape[-2]) if transpose_mat2 else (mat2_shape[-2], mat2_shape[-1])
    if k != k2:
        raise InvalidArgumentError(f"MatMul: reduction dims differ: self {list(self_shape)} gives K={k}, mat2 "
                                   f"{list(mat2_shape)} gives K={k2} (transpose_self={transpose_self}, "
                                   f"transpose_mat2={transpose_mat2})")
    if len(self_shape) == 2 and len(mat2_shape) == 2:
        return (m, n)
    b1 = self_shape[0] if len(self_shape) == 3 else 1
    b2 = mat2_shape[0] if len(mat2_shape) == 3 else 1
    if b1 != b2 and 1 not in (b1, b2):
        raise InvalidArgumentError(f"MatMul: batch dims {b1} and {b2} do not broadcast")
    return (max(b1, b2) if min(b1, b2) else 0, m, n)


def _float32_operand(arr: np.ndarray, dt: DataType, op: str, name: str, transpose: bool) -> np.ndarray:
    """arr as float32 (a view for DT_FLOAT, widened otherwise), last two dims swapped if transpose."""
    view = kernel_view(arr, dt, op, name)
    if dt != DataType.DT_FLOAT:
        wide = np.empty(view.shape, np.float32)
        cast(arr, wide, dt, DataType.DT_FLOAT)
        view = wide
    return view.swapaxes(-1, -2) if transpose else view


def _product(op: str, self: np.ndarray, mat2: np.ndarray, out: np.ndarray, dt: DataType, transpose_self: bool,
             transpose_mat2: bool, into_out: bool) -> np.ndarray:
    """The float32 product (written straight into a DT_FLOAT `out` when into_out)."""
    want = matmul_shape(self.shape, mat2.shape, transpose_self, transpose_mat2)
    o = kernel_view(out, dt, op, "out")
    if o.shape != want:
        raise InvalidArgumentError(f"{op}: out shape {list(o.shape)} must be {list(want)}")
    a = _float32_operand(self, dt, op, "self", transpose_self)
    b = _float32_operand(mat2, dt, op, "mat2", transpose_mat2)
    if into_out:
        np.matmul(a, b, out=o)
        return o
    return np.matmul(a, b)


def matmul(self: np.ndarray, mat2: np.ndarray, out: np.ndarray, dtype: "DataType | str",
           transpose_self: bool = False, transpose_mat2: bool = False) -> None:
    """out = op(self) @ op(mat2) for 2-D, or batched 3-D (batch 1 broadcasts), op = optional transpose of the
    last two dims (L0 MatMul / BatchMatMul). Float32 accumulation; half types round once on store."""
    dt = check_dtype(dtype, FLOAT_TYPES, "MatMul")
    if dt == DataType.DT_FLOAT:
        _product("MatMul", self, mat2, out, dt, transpose_self, transpose_mat2, into_out=True)
        return
    prod = _product("MatMul", self, mat2, out, dt, transpose_self, transpose_mat2, into_out=False)
    if prod.size:
        cast(prod, out, DataType.DT_FLOAT, dt)


def matmul_bias_act(self: np.ndarray, mat2: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
                    dtype: "DataType | str", activation: str = "none", transpose_self: bool = False,
                    transpose_mat2: bool = False, bias_dtype: "DataType | str | None" = None) -> None:
    """out = activation(op(self) @ op(mat2) + bias), activation in {none, relu, gelu_tanh}.

    The product accumulates in float32; bias (broadcast to out, typically [N]) is added, the activation
    applied in float32 and the result rounded once on store. gelu_tanh is
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    """
    dt = check_dtype(dtype, FLOAT_TYPES, "FusedMatMul")
    if activation not in ACTIVATIONS:
        raise InvalidArgumentError(f"FusedMatMul: activation={activation!r} is not supported; "
                                   f"supported: {', '.join(ACTIVATIONS)}")
    prod = np.ascontiguousarray(
        _product("FusedMatMul", self, mat2, out, dt, transpose_self, transpose_mat2, into_out=False))
    o = kernel_view(out, dt, "FusedMatMul", "out")
    if o.size == 0:
        return
    if bias is None:
        bv, has_bias, sb = prod, False, (0,) * o.ndim
    else:
        bdt = check_dtype(dt if bias_dtype is None else bias_dtype, FLOAT_TYPES, "FusedMatMul", "bias_dtype")
        bv, has_bias = kernel_view(bias, bdt, "FusedMatMul", "bias"), True
        sb = broadcast_strides(bv.shape, element_strides(bv), o.shape, "FusedMatMul", "bias")
    if bv.size == 0:
        raise InvalidArgumentError(f"FusedMatMul: bias shape {list(bv.shape)} is empty but out is not")
    (fc, fb, fo), plan = plan_operands(o.shape, [(prod, None, False), (bv, sb, False), (o, None, True)])
    _bias_act_kernel(fc, fb, fo, plan.starts, plan.inner, plan.steps, ACTIVATIONS[activation], has_bias)
