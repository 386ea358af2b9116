"""The features a kernel-duration fit uses, computed the same way for profile rows and for opsim's kernels.

bytes moved = bytes of all inputs + all outputs (shapes x dtype sizes); flops = 2 x M x N x K for the
matrix-multiply family (K recovered from the shapes), else the larger of input and output element counts
(one operation per element, as opsim's elementwise tilings count); block dim as recorded.
"""
from __future__ import annotations

import math

from opsim.device.fitted import signature_key
from opsim.ingest.kernels import KernelRecord, dtype_itemsize
from opsim.device.family import family_of

#: op types whose work is a matrix multiply (profilers' type names).
MATMUL_TYPES = frozenset({"MatMul", "MatMulV2", "MatMulV3", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3",
                          "GEMM", "MatMulCommon", "QuantBatchMatmulV3", "WeightQuantBatchMatmulV2"})


def _elements(shape: tuple[int, ...]) -> int:
    return math.prod(max(d, 0) for d in shape)


def _matmul_k(input_shapes: tuple[tuple[int, ...], ...], output_shapes: tuple[tuple[int, ...], ...]
              ) -> tuple[float, float]:
    """(K, elements of A and B beyond what K needs) for [b,]M,K x [b,]K,N -> [b,]M,N, either operand possibly
    transposed. K is what each operand holds per row of the output (|A| / (batch(A) x M), |B| / (batch(B) x
    N)); when a profile's shapes disagree the smaller one is taken (the larger would put the kernel above the
    cube's peak) and the rest of the larger operand is not read. For outputs of fewer than two dims: the
    geometric mean sqrt(|A| x |B| / |C| / batch(B)), nothing in excess."""
    a, b, c = _elements(input_shapes[0]), _elements(input_shapes[1]), _elements(output_shapes[0])
    out, sa, sb = output_shapes[0], input_shapes[0], input_shapes[1]
    batch_b = _elements(sb[:-2]) if len(sb) > 2 else 1
    if len(out) >= 2 and out[-1] > 0 and out[-2] > 0:
        batch_a = _elements(sa[:-2]) if len(sa) > 2 else 1
        ka, kb = a / max(batch_a * out[-2], 1), b / max(batch_b * out[-1], 1)
        if ka > 0 and kb > 0:
            k = min(ka, kb)
            return k, (ka - k) * batch_a * out[-2] + (kb - k) * batch_b * out[-1]
    return math.sqrt(a * b / c / max(batch_b, 1)), 0.0


def matmul_flops(input_shapes: tuple[tuple[int, ...], ...], output_shapes: tuple[tuple[int, ...], ...]) -> float:
    """2*M*N*K (K as ``_matmul_k`` finds it)."""
    if len(input_shapes) < 2 or not output_shapes:
        return 0.0
    c = _elements(output_shapes[0])
    if c == 0:
        return 0.0
    return 2.0 * c * _matmul_k(input_shapes, output_shapes)[0]


def matmul_unread_bytes(rec: KernelRecord, itemsize: float) -> float:
    """Bytes of the operands a matrix multiply does not read (0 when the shapes agree; see ``_matmul_k``)."""
    if len(rec.input_shapes) < 2 or not rec.output_shapes or _elements(rec.output_shapes[0]) == 0:
        return 0.0
    return _matmul_k(rec.input_shapes, rec.output_shapes)[1] * itemsize


def record_flops(rec: KernelRecord) -> float:
    if rec.op_type in MATMUL_TYPES:
        return matmul_flops(rec.input_shapes, rec.output_shapes)
    return float(max(rec.input_elements, rec.output_elements))


def record_signature(rec: KernelRecord) -> str:
    return signature_key(rec.op_type, rec.core, rec.input_shapes, rec.input_dtypes, rec.output_shapes,
                         rec.output_dtypes)


def record_features(rec: KernelRecord) -> tuple[float, float, int]:
    """(flops, bytes moved, block dim) of one profile row (flops as the family model counts them)."""
    _fam, flops, nbytes, bd, _size = record_work(rec)
    return flops, nbytes, bd


def _conv_flops(rec: KernelRecord) -> float:
    """2 x weight elements x output-gradient (or output) elements / output channels, for Conv2D and its
    backprops: the weight is the FRACTAL_Z tensor (C1·kh·kw, Cout/16, 16, C0) or an ND (Cout, Cin, kh, kw)."""
    ins, outs = rec.input_shapes, rec.output_shapes
    fmts = tuple(rec.input_formats) + tuple(rec.output_formats)
    shapes = tuple(ins) + tuple(outs)
    weight = None
    for shape, fmt in zip(shapes, fmts):
        if fmt.startswith("FRACTAL_Z") and len(shape) == 4:
            weight, cout = shape, shape[1] * shape[2]
            break
    if weight is None:
        if "BackpropFilter" in rec.op_type and outs and len(outs[0]) == 4:
            weight, cout = outs[0], outs[0][0]
        elif len(ins) >= 2 and len(ins[1]) == 4:
            weight, cout = ins[1], ins[1][0]
        else:
            return float(max(rec.input_elements, rec.output_elements))
    if rec.op_type.startswith("Conv2D") and "Backprop" not in rec.op_type:
        y = outs[0] if outs else ()
    else:
        y = ins[-1] if ins else ()
    return 2.0 * _elements(weight) * _elements(y) / max(cout, 1)


def _attention_flops(rec: KernelRecord) -> float:
    """4 x B x S_q x S_kv x H (two matrix multiplies) forward, 2.5 times that for the gradient (five);
    q, k from the first two inputs in BSH / SBH / BNSD layouts (product of all but the sequence axis = B x H)."""
    if len(rec.input_shapes) < 2 or not rec.input_shapes[0] or not rec.input_shapes[1]:
        return float(max(rec.input_elements, rec.output_elements))
    q, k = rec.input_shapes[0], rec.input_shapes[1]
    fmt = rec.input_formats[0] if rec.input_formats else ""
    seq_axis = 0 if fmt in ("NCL", "SBH") or (len(q) == 3 and q[0] > q[1] and q[0] == k[0] and q[1] <= 64) else \
        (len(q) - 2 if len(q) == 4 else 1)
    s_q, s_kv = q[seq_axis], k[seq_axis]
    bh = _elements(q) / max(s_q, 1)
    f = 4.0 * bh * s_q * s_kv
    return 2.5 * f if "Grad" in rec.op_type else f


def _is_float(dtype: str) -> bool:
    d = dtype.lower()
    return not (d.startswith(("int", "uint", "bool", "dt_int", "dt_uint", "dt_bool")) or d in ("undefined", ""))


def record_itemsize(rec: KernelRecord) -> float:
    """Element size of the kernel's largest tensor (the dtype the work runs in); for the cube family the
    largest floating-point input (a bool mask or int index tensor sets no cube rate)."""
    best, size = -1, 2.0
    shapes = tuple(rec.input_shapes) + tuple(rec.output_shapes)
    dtypes = tuple(rec.input_dtypes) + tuple(rec.output_dtypes)
    if len(rec.input_dtypes) == 1 and len(rec.input_shapes) > 1:
        dtypes = rec.input_dtypes * len(rec.input_shapes) + tuple(rec.output_dtypes)
    floats_only = family_of(rec.op_type, rec.core) == "cube" and any(_is_float(d) for d in dtypes)
    for s, d in zip(shapes, dtypes):
        e = _elements(s)
        if e > best and (not floats_only or _is_float(d)):
            try:
                v = dtype_itemsize(d)
            except Exception:  # an unknown name: keep the 16-bit default
                continue
            if v > 0:
                best, size = e, v
    return size


#: op types that only write their output: the input gives its shape and dtype, its data is never read.
WRITE_ONLY = frozenset({"ZerosLike", "OnesLike"})


def record_work(rec: KernelRecord) -> tuple[str, float, float, int, float]:
    """(family, flops, bytes moved, block dim, element size) of one profile row, for the family model."""
    fam = family_of(rec.op_type, rec.core)
    if rec.op_type in WRITE_ONLY:
        return fam, float(rec.output_elements), float(rec.output_bytes), rec.block_dim, record_itemsize(rec)
    if fam == "cube":
        if rec.op_type.startswith("Conv") or "Conv" in rec.op_type:
            flops = _conv_flops(rec)
        elif "Attention" in rec.op_type:
            flops = _attention_flops(rec)
        else:
            flops = matmul_flops(rec.input_shapes, rec.output_shapes)
            size = record_itemsize(rec)
            return fam, flops, float(rec.bytes_moved) - matmul_unread_bytes(rec, size), rec.block_dim, size
    else:
        flops = float(max(rec.input_elements, rec.output_elements))
    return fam, flops, float(rec.bytes_moved), rec.block_dim, record_itemsize(rec)
