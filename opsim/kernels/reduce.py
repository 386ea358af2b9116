"""Reductions: ReduceSum, Softmax, RmsNorm / AddRmsNorm, and the non-finite check of overflow detection.

Storage arrays in, preallocated outputs written in place (see elementwise for the conventions). Float sums
accumulate in float32 (half types included) and integer sums in int64; a float sum along a row uses eight
interleaved partial sums (fixed order, so results are deterministic, and more accurate than one running
sum). DT_FLOAT ReduceSum is numpy's sum, measured as fast or faster (benchmarks/numerics.py).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit, types, uintp
from numba.extending import overload

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError
from opsim.kernels.dtype_bits import ALL_TYPES, ARITH_TYPES, FLOAT_TYPES, check_dtype, kernel_view, load, store
from opsim.kernels.elementwise import cast
from opsim.kernels.mathf32 import exp_f32
from opsim.kernels.strided import broadcast_strides, element_strides, plan_operands


# --- kernels -----------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _float_lanes(a, p, step, n):
    """float32 sum of n elements as eight interleaved partial sums, combined pairwise."""
    z = np.float32(0.0)
    s0, s1, s2, s3, s4, s5, s6, s7 = z, z, z, z, z, z, z, z
    j = uintp(0)
    while j + uintp(8) <= n:
        q = p + j * step
        s0 += load(a[q])
        s1 += load(a[q + step])
        s2 += load(a[q + uintp(2) * step])
        s3 += load(a[q + uintp(3) * step])
        s4 += load(a[q + uintp(4) * step])
        s5 += load(a[q + uintp(5) * step])
        s6 += load(a[q + uintp(6) * step])
        s7 += load(a[q + uintp(7) * step])
        j += uintp(8)
    while j < n:
        s0 += load(a[p + j * step])
        j += uintp(1)
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


def row_sum(a, p, step, n):
    """Sum, in the compute type, of n elements of `a` from flat offset p with the given step. Numba-only
    generic: floats use eight interleaved partial sums (fixed order, so deterministic, and more accurate
    than one running sum); integers, whose addition is associative, use one sum LLVM vectorizes."""
    raise TypeError("row_sum() is only callable inside Numba kernels")


@overload(row_sum)
def _row_sum_impl(a, p, step, n):
    half_bits = a.dtype in (types.int16, types.uint16)  # float16 / bfloat16 kernel views
    if isinstance(a.dtype, types.Boolean) or (isinstance(a.dtype, types.Integer) and not half_bits):
        def int_sum(a, p, step, n):
            s = np.int64(0)
            for j in range(n):
                s += load(a[p + j * step])
            return s
        return int_sum

    def float_sum(a, p, step, n):
        if step == 1:  # a constant unit step lets LLVM use plain vector loads
            return _float_lanes(a, p, uintp(1), n)
        return _float_lanes(a, p, step, n)
    return float_sum


@njit(cache=True, error_model="numpy")
def _sum_kernel(a, acc, starts, inner, steps):
    """acc[...] += a[...] along rows; acc is read with stride 0 along reduced dims."""
    sa, sc = uintp(steps[0]), uintp(steps[1])
    n = uintp(inner)
    for r in range(starts.shape[1]):
        pa, pc = uintp(starts[0, r]), uintp(starts[1, r])
        if sc == 0:
            acc[pc] += row_sum(a, pa, sa, n)
        else:
            for j in range(n):
                acc[pc + j * sc] += load(a[pa + j * sa])


@njit(cache=True, error_model="numpy")
def _softmax_kernel(a, out, starts, inner, steps):
    """Numerically stable softmax of every row: exp(x - max) / sum, in float32.

    Separate passes (load and max, exp, sum, divide) keep the exp and divide loops free of a loop-carried
    dependency, so they vectorize; the sum uses the fixed-order partial sums of row_sum.
    """
    sa, so = uintp(steps[0]), uintp(steps[1])
    n = uintp(inner)
    tmp = np.empty(inner, np.float32)
    for r in range(starts.shape[1]):
        pa, po = uintp(starts[0, r]), uintp(starts[1, r])
        m = np.float32(-np.inf)
        for j in range(n):
            v = load(a[pa + j * sa])
            tmp[j] = v
            m = v if v > m else m  # NaN never wins, but it reaches the sum through exp and poisons the row
        for j in range(n):
            tmp[j] = exp_f32(tmp[j] - m)
        s = row_sum(tmp, uintp(0), uintp(1), n)
        for j in range(n):
            out[po + j * so] = store(tmp[j] / s, out)


@njit(cache=True, error_model="numpy")
def _normalize_row(tmp, n, gamma, pg, sg, y, py, sy, eps):
    """y = tmp * rstd * gamma with rstd = 1 / sqrt(mean(tmp^2) + eps); returns rstd (float32)."""
    z = np.float32(0.0)
    s0, s1, s2, s3 = z, z, z, z
    j = uintp(0)
    while j + uintp(4) <= n:
        s0 += tmp[j] * tmp[j]
        s1 += tmp[j + uintp(1)] * tmp[j + uintp(1)]
        s2 += tmp[j + uintp(2)] * tmp[j + uintp(2)]
        s3 += tmp[j + uintp(3)] * tmp[j + uintp(3)]
        j += uintp(4)
    while j < n:
        s0 += tmp[j] * tmp[j]
        j += uintp(1)
    ss = (s0 + s1) + (s2 + s3)
    rstd = np.float32(1.0) / np.sqrt(ss / np.float32(n) + eps)
    for k in range(n):
        y[py + k * sy] = store(tmp[k] * rstd * load(gamma[pg + k * sg]), y)
    return rstd


@njit(cache=True, error_model="numpy")
def _rms_norm_kernel(x, gamma, y, rstd, starts, inner, steps, eps):
    sx, sg, sy = uintp(steps[0]), uintp(steps[1]), uintp(steps[2])
    n = uintp(inner)
    tmp = np.empty(inner, np.float32)
    for r in range(starts.shape[1]):
        px = uintp(starts[0, r])
        for j in range(n):
            tmp[j] = load(x[px + j * sx])
        rs = _normalize_row(tmp, n, gamma, uintp(starts[1, r]), sg, y, uintp(starts[2, r]), sy, eps)
        rstd[uintp(starts[3, r])] = rs


@njit(cache=True, error_model="numpy")
def _add_rms_norm_kernel(x1, x2, gamma, y, rstd, x_out, starts, inner, steps, eps):
    s1, s2, sg, sy, sx = uintp(steps[0]), uintp(steps[1]), uintp(steps[2]), uintp(steps[3]), uintp(steps[5])
    n = uintp(inner)
    tmp = np.empty(inner, np.float32)
    for r in range(starts.shape[1]):
        p1, p2, px = uintp(starts[0, r]), uintp(starts[1, r]), uintp(starts[5, r])
        for j in range(n):
            xs = store(load(x1[p1 + j * s1]) + load(x2[p2 + j * s2]), x_out)
            x_out[px + j * sx] = xs
            tmp[j] = load(xs)  # normalise the rounded sum: the x output and y agree
        rs = _normalize_row(tmp, n, gamma, uintp(starts[2, r]), sg, y, uintp(starts[3, r]), sy, eps)
        rstd[uintp(starts[4, r])] = rs


@njit(cache=True, error_model="numpy")
def _non_finite_kernel(bits, starts, inner, steps, mask):
    """True if some element has every exponent bit set (inf or NaN); stops at the first row that has one."""
    s = uintp(steps[0])
    n = uintp(inner)
    for r in range(starts.shape[1]):
        p = uintp(starts[0, r])
        hits = 0
        for j in range(n):
            hits += (bits[p + j * s] & mask) == mask
        if hits:
            return True
    return False


# --- wrappers ----------------------------------------------------------------------------------------
def _normalize_axes(axes: Sequence[int], ndim: int, op: str) -> list[int]:
    rank = max(ndim, 1)
    out: list[int] = []
    for ax in axes:
        if isinstance(ax, bool) or not isinstance(ax, (int, np.integer)):
            raise InvalidArgumentError(f"{op}: axis {ax!r} must be an integer")
        if not -rank <= ax < rank:
            raise InvalidArgumentError(f"{op}: axis {ax} is out of range for a {ndim}-D input "
                                       f"(allowed {-rank}..{rank - 1})")
        a = int(ax) % rank
        if a in out:
            raise InvalidArgumentError(f"{op}: axis {ax} appears more than once in axes {list(axes)}")
        out.append(a)
    return out


def reduce_sum_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    """Output shape of ReduceSum (an empty `axes` reduces every dim, as aclnnReduceSum with no dims)."""
    norm = _normalize_axes(axes, len(shape), "ReduceSum") or list(range(len(shape)))
    if keepdims:
        return tuple(1 if d in norm else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in norm)


def reduce_sum(self: np.ndarray, axes: Sequence[int], keepdims: bool, out: np.ndarray,
               dtype: "DataType | str") -> None:
    """out = sum of self over `axes` (empty: all dims), keeping reduced dims as 1 if keepdims (L0 ReduceSum).

    Floats accumulate in float32 and round once on store; integers accumulate in int64 and wrap on store.
    A sum over an empty axis is 0.
    """
    dt = check_dtype(dtype, ARITH_TYPES, "ReduceSum")
    a = kernel_view(self, dt, "ReduceSum", "self")
    o = kernel_view(out, dt, "ReduceSum", "out")
    want = reduce_sum_shape(a.shape, axes, keepdims)
    if o.shape != want:
        raise InvalidArgumentError(f"ReduceSum: out shape {list(o.shape)} must be {list(want)} for self shape "
                                   f"{list(a.shape)}, axes {list(axes)}, keepdims={keepdims}")
    if dt == DataType.DT_FLOAT:
        # float32 in, float32 accumulation: numpy's pairwise sum is as fast or faster than the Numba kernel
        # (benchmarks/numerics.py) and more accurate, so it is used directly
        norm = _normalize_axes(axes, a.ndim, "ReduceSum") or list(range(a.ndim))
        np.sum(a, axis=tuple(d for d in norm if d < a.ndim), dtype=np.float32, keepdims=keepdims, out=o)
        return
    reduce_sum_numba(a, axes, out, dt)


def reduce_sum_numba(a: np.ndarray, axes: Sequence[int], out: np.ndarray, dt: DataType) -> None:
    """The Numba ReduceSum path (every dtype but DT_FLOAT uses it): accumulate into a float32 / int64
    buffer of the keepdims shape, read along the input with zero strides on reduced dims, then one Cast.
    `a` is the kernel view of the input, `out` the storage array of the already checked output."""
    float_acc = dt in FLOAT_TYPES
    acc = np.zeros(reduce_sum_shape(a.shape, axes, True), np.float32 if float_acc else np.int64)
    if a.size:
        acc_strides = broadcast_strides(acc.shape, element_strides(acc), a.shape, "ReduceSum", "acc")
        (fa, fc), plan = plan_operands(a.shape, [(a, None, False), (acc, acc_strides, True)])
        _sum_kernel(fa, fc, plan.starts, plan.inner, plan.steps)
    if out.size:
        cast(acc.reshape(out.shape), out, DataType.DT_FLOAT if float_acc else DataType.DT_INT64, dt)


def _dim(dim: int, ndim: int, op: str) -> int:
    return _normalize_axes([dim], ndim, op)[0]


def softmax(self: np.ndarray, dim: int, out: np.ndarray, dtype: "DataType | str") -> None:
    """out = softmax(self) along `dim` (L0 SoftmaxV2), computed stably in float32 as exp(x - max) / sum.

    A row holding NaN, or +inf, or only -inf gives NaN, as torch does.
    """
    dt = check_dtype(dtype, FLOAT_TYPES, "SoftmaxV2")
    a = kernel_view(self, dt, "SoftmaxV2", "self")
    o = kernel_view(out, dt, "SoftmaxV2", "out")
    if o.shape != a.shape:
        raise InvalidArgumentError(f"SoftmaxV2: out shape {list(o.shape)} must equal self shape {list(a.shape)}")
    d = _dim(dim, a.ndim, "SoftmaxV2")
    if a.size == 0:
        return
    if a.ndim == 0:
        a, o = a.reshape(1), o.reshape(1)
    order = [k for k in range(a.ndim) if k != d] + [d]
    shape = [a.shape[k] for k in order]
    sa, so = element_strides(a), element_strides(o)
    (fa, fo), plan = plan_operands(shape, [(a, [sa[k] for k in order], False), (o, [so[k] for k in order], True)],
                                   inner_dims=1)
    _softmax_kernel(fa, fo, plan.starts, plan.inner, plan.steps)


def _norm_operands(op: str, x: np.ndarray, gamma: np.ndarray, rstd: np.ndarray) -> tuple[int, np.ndarray]:
    """Check gamma against x's trailing dims; return gamma's rank and rstd viewed with keepdims shape."""
    g = gamma.ndim
    if g < 1 or g > x.ndim or tuple(x.shape[x.ndim - g:]) != tuple(gamma.shape):
        raise InvalidArgumentError(f"{op}: gamma shape {list(gamma.shape)} must equal the trailing dims of x "
                                   f"shape {list(x.shape)}")
    lead = tuple(x.shape[:x.ndim - g])
    if rstd.shape not in (lead, lead + (1,) * g):
        raise InvalidArgumentError(f"{op}: rstd shape {list(rstd.shape)} must be {list(lead + (1,) * g)} "
                                   f"(or {list(lead)})")
    return g, rstd.reshape(lead + (1,) * g)


def rms_norm(x: np.ndarray, gamma: np.ndarray, epsilon: float, y: np.ndarray, rstd: np.ndarray,
             dtype: "DataType | str", gamma_dtype: "DataType | str | None" = None) -> None:
    """y = x / sqrt(mean(x^2) + eps) * gamma over gamma's dims (the last ones of x), and rstd =
    1 / sqrt(mean(x^2) + eps) per row as float32 (L0 RmsNorm). All in float32; y rounds on store."""
    dt = check_dtype(dtype, FLOAT_TYPES, "RmsNorm")
    gdt = check_dtype(dt if gamma_dtype is None else gamma_dtype, FLOAT_TYPES, "RmsNorm", "gamma_dtype")
    xv = kernel_view(x, dt, "RmsNorm", "x")
    gv = kernel_view(gamma, gdt, "RmsNorm", "gamma")
    yv = kernel_view(y, dt, "RmsNorm", "y")
    rv = kernel_view(rstd, DataType.DT_FLOAT, "RmsNorm", "rstd")
    if yv.shape != xv.shape:
        raise InvalidArgumentError(f"RmsNorm: y shape {list(yv.shape)} must equal x shape {list(xv.shape)}")
    g, rk = _norm_operands("RmsNorm", xv, gv, rv)
    if xv.size == 0:
        return
    sg = broadcast_strides(gv.shape, element_strides(gv), xv.shape, "RmsNorm", "gamma")
    sr = broadcast_strides(rk.shape, element_strides(rk), xv.shape, "RmsNorm", "rstd")
    (fx, fg, fy, fr), plan = plan_operands(
        xv.shape, [(xv, None, False), (gv, sg, False), (yv, None, True), (rk, sr, True)], inner_dims=g)
    if plan is None:  # the normalised dims are not one strided run: work on contiguous copies (l0op::Contiguous)
        y_tmp = np.empty(y.shape, y.dtype)
        rms_norm(np.ascontiguousarray(x), np.ascontiguousarray(gamma), epsilon, y_tmp, rstd, dt, gdt)
        np.copyto(y, y_tmp)
        return
    _rms_norm_kernel(fx, fg, fy, fr, plan.starts, plan.inner, plan.steps, np.float32(epsilon))


def add_rms_norm(x1: np.ndarray, x2: np.ndarray, gamma: np.ndarray, epsilon: float, y: np.ndarray,
                 rstd: np.ndarray, x_out: np.ndarray, dtype: "DataType | str",
                 gamma_dtype: "DataType | str | None" = None) -> None:
    """x_out = x1 + x2 (rounded to dtype), then RmsNorm of that x into y and rstd (L0 AddRmsNorm).

    The norm is taken of the rounded sum, so y is exactly RmsNorm(x_out), as a consumer of x_out sees it.
    """
    dt = check_dtype(dtype, FLOAT_TYPES, "AddRmsNorm")
    gdt = check_dtype(dt if gamma_dtype is None else gamma_dtype, FLOAT_TYPES, "AddRmsNorm", "gamma_dtype")
    v1 = kernel_view(x1, dt, "AddRmsNorm", "x1")
    v2 = kernel_view(x2, dt, "AddRmsNorm", "x2")
    gv = kernel_view(gamma, gdt, "AddRmsNorm", "gamma")
    yv = kernel_view(y, dt, "AddRmsNorm", "y")
    rv = kernel_view(rstd, DataType.DT_FLOAT, "AddRmsNorm", "rstd")
    xo = kernel_view(x_out, dt, "AddRmsNorm", "x_out")
    for name, v in (("x2", v2), ("y", yv), ("x_out", xo)):
        if v.shape != v1.shape:
            raise InvalidArgumentError(f"AddRmsNorm: {name} shape {list(v.shape)} must equal x1 shape {list(v1.shape)}")
    g, rk = _norm_operands("AddRmsNorm", v1, gv, rv)
    if v1.size == 0:
        return
    sg = broadcast_strides(gv.shape, element_strides(gv), v1.shape, "AddRmsNorm", "gamma")
    sr = broadcast_strides(rk.shape, element_strides(rk), v1.shape, "AddRmsNorm", "rstd")
    flats, plan = plan_operands(v1.shape, [(v1, None, False), (v2, None, False), (gv, sg, False), (yv, None, True),
                                           (rk, sr, True), (xo, None, True)], inner_dims=g)
    if plan is None:  # the normalised dims are not one strided run: work on contiguous copies (l0op::Contiguous)
        y_tmp, x_tmp = np.empty(y.shape, y.dtype), np.empty(x_out.shape, x_out.dtype)
        add_rms_norm(np.ascontiguousarray(x1), np.ascontiguousarray(x2), np.ascontiguousarray(gamma), epsilon,
                     y_tmp, rstd, x_tmp, dt, gdt)
        np.copyto(y, y_tmp)
        np.copyto(x_out, x_tmp)
        return
    f1, f2, fg, fy, fr, fx = flats
    _add_rms_norm_kernel(f1, f2, fg, fy, fr, fx, plan.starts, plan.inner, plan.steps, np.float32(epsilon))


_EXPONENT_MASK = {DataType.DT_FLOAT: (np.uint32, 0x7F800000), DataType.DT_FLOAT16: (np.uint16, 0x7C00),
                  DataType.DT_BF16: (np.uint16, 0x7F80)}


def has_non_finite(arr: np.ndarray, dtype: "DataType | str") -> bool:
    """Whether `arr` holds an inf or NaN: what the NonFiniteCheck kernel reports for overflow detection.

    Only DT_FLOAT, DT_FLOAT16 and DT_BF16 can hold non-finite values; integer and bool dtypes give False.
    An empty array gives False.
    """
    dt = check_dtype(dtype, ALL_TYPES, "NonFiniteCheck")
    kernel_view(arr, dt, "NonFiniteCheck", "arr")
    if dt not in _EXPONENT_MASK or arr.size == 0:
        return False
    bits_type, mask = _EXPONENT_MASK[dt]
    bits = arr.view(bits_type)
    (fb,), plan = plan_operands(bits.shape, [(bits, None, False)])
    return bool(_non_finite_kernel(fb, plan.starts, plan.inner, plan.steps, bits_type(mask)))
