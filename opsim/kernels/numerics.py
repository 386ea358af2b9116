"""Operator numerics: one pure array function per L0 op, for `opsim.ops` to run on device-memory views.

Conventions shared by every function (details in dtype_bits and elementwise):
- inputs are numpy arrays in their storage dtype (`DataType.numpy_dtype`; bfloat16 as uint16 bit patterns),
  with any strides, including the zero strides of a broadcast view;
- results are written into a preallocated `out` (outputs sit at planned device addresses), nothing returned
  except where the op produces a count (NonZero) or a flag (has_non_finite);
- a `dtype` tag (DataType or a name such as "bf16") says what the storage bits mean;
- float16/bfloat16 compute in float32 and round once on store; integer arithmetic is int64, wrapping.

KERNELS maps L0 op type names to these functions.
"""
from __future__ import annotations

from typing import Callable

from opsim.kernels.dtype_bits import ALL_TYPES, ARITH_TYPES, FLOAT_TYPES, HARDWARE_HALF
from opsim.kernels.elementwise import abs_, add, cast, mul, relu, sigmoid
from opsim.kernels.index import count_non_zero, index_put, non_zero, pad, pad_shape
from opsim.kernels.matmul import ACTIVATIONS, matmul, matmul_bias_act, matmul_shape
from opsim.kernels.reduce import add_rms_norm, has_non_finite, reduce_sum, reduce_sum_shape, rms_norm, softmax

#: L0 op type -> numerics function. MatMul and BatchMatMul share one function (2-D or batched 3-D).
KERNELS: dict[str, Callable[..., object]] = {
    "Add": add,
    "Mul": mul,
    "Abs": abs_,
    "Relu": relu,
    "Sigmoid": sigmoid,
    "Cast": cast,
    "ReduceSum": reduce_sum,
    "SoftmaxV2": softmax,
    "MatMul": matmul,
    "BatchMatMul": matmul,
    "FusedMatMul": matmul_bias_act,
    "PadV3": pad,
    "IndexPutV2": index_put,
    "NonZero": non_zero,
    "RmsNorm": rms_norm,
    "AddRmsNorm": add_rms_norm,
    "NonFiniteCheck": has_non_finite,
}

__all__ = [
    "KERNELS", "ACTIVATIONS", "ALL_TYPES", "ARITH_TYPES", "FLOAT_TYPES", "HARDWARE_HALF",
    "abs_", "add", "add_rms_norm", "cast", "count_non_zero", "has_non_finite", "index_put", "matmul",
    "matmul_bias_act", "matmul_shape", "mul", "non_zero", "pad", "pad_shape", "reduce_sum", "reduce_sum_shape",
    "relu", "rms_norm", "sigmoid", "softmax",
]
