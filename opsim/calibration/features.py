"""The features a kernel-duration fit uses, computed the same way for profile rows and for opsim's kernels.

bytes moved = bytes of all inputs + all outputs (shapes x dtype sizes); flops = 2 x M x N x K for the
matrix-multiply family (K recovered from the shapes), else the larger of input and output element counts
(one operation per element, as opsim's elementwise tilings count); block dim as recorded.
"""
from __future__ import annotations

import math

from opsim.device.fitted import signature_key
from opsim.ingest.kernels import KernelRecord

#: op types whose work is a matrix multiply (profilers' type names).
MATMUL_TYPES = frozenset({"MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
                          "GEMM", "MatMulCommon", "QuantBatchMatmulV3", "WeightQuantBatchMatmulV2"})


def _elements(shape: tuple[int, ...]) -> int:
    return math.prod(max(d, 0) for d in shape)


def matmul_flops(input_shapes: tuple[tuple[int, ...], ...], output_shapes: tuple[tuple[int, ...], ...]) -> float:
    """2*M*N*K with K = sqrt(|A| x |B| / |C| / batch(B)): exact for [b,]M,K x [b,]K,N -> [b,]M,N."""
    if len(input_shapes) < 2 or not output_shapes:
        return 0.0
    a, b, c = _elements(input_shapes[0]), _elements(input_shapes[1]), _elements(output_shapes[0])
    if c == 0:
        return 0.0
    batch_b = _elements(input_shapes[1][:-2]) if len(input_shapes[1]) > 2 else 1
    k = math.sqrt(a * b / c / max(batch_b, 1))
    return 2.0 * c * k


def record_flops(rec: KernelRecord) -> float:
    if rec.op_type in MATMUL_TYPES:
        return matmul_flops(rec.input_shapes, rec.output_shapes)
    return float(max(rec.input_elements, rec.output_elements))


def record_signature(rec: KernelRecord) -> str:
    return signature_key(rec.op_type, rec.core, rec.input_shapes, rec.input_dtypes, rec.output_shapes,
                         rec.output_dtypes)


def record_features(rec: KernelRecord) -> tuple[float, float, int]:
    """(flops, bytes moved, block dim) of one profile row."""
    return record_flops(rec), float(rec.bytes_moved), rec.block_dim
