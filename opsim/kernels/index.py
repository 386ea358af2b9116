"""Indexing and data movement: Pad (constant), IndexPut (index_put_ with accumulate) and NonZero.

Storage arrays in, preallocated outputs written in place (see elementwise for the conventions). Pad is pure
data movement, a fill and one strided copy, which numpy's copy loops already do at memory speed
(benchmarks/numerics.py compares them with the Numba copy kernel), so it stays in numpy.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from numba import njit, uintp

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError
from opsim.kernels.dtype_bits import ALL_TYPES, FLOAT_TYPES, check_dtype, kernel_view, load, store
from opsim.kernels.elementwise import cast
from opsim.kernels.strided import (broadcast_shape, broadcast_strides, element_strides, flat_view, plan_operands,
                                   row_plan, row_starts)


# --- kernels -----------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def _index_put_acc_kernel(out, out_off, out_strides, dims, idx, values, v_starts, t_starts, inner, steps):
    """For every index tuple b, in order: out[idx[:, b]][tail] += values[b][tail].

    Rows of the tail block are t_starts (out, values). Duplicates are each added in turn: one float32 add
    and rounding at a time, as the device's atomic adds do.
    """
    so, sv = uintp(steps[0]), uintp(steps[1])
    n = uintp(inner)
    k = idx.shape[0]
    for b in range(idx.shape[1]):
        po = out_off
        for d in range(k):
            i = idx[d, b]
            if i < 0:
                i += dims[d]
            po += i * out_strides[d]
        pv = v_starts[0, b]
        for r in range(t_starts.shape[1]):
            qo = uintp(po + t_starts[0, r])
            qv = uintp(pv + t_starts[1, r])
            for j in range(n):
                out[qo + j * so] = store(load(out[qo + j * so]) + load(values[qv + j * sv]), out)


@njit(cache=True, error_model="numpy")
def _count_nonzero_kernel(a, starts, inner, steps):
    s = uintp(steps[0])
    n = uintp(inner)
    count = 0
    for r in range(starts.shape[1]):
        p = uintp(starts[0, r])
        for j in range(n):
            count += load(a[p + j * s]) != 0
    return count


@njit(cache=True, error_model="numpy")
def _nonzero_kernel(a, starts, inner, step, outer_dims, coords):
    """Row-major coordinates of the non-zero elements into coords[:count]; returns count.

    Rows are the original last dim (never merged), in C order of the outer dims, so a row's outer
    coordinates are unravelled once per row and the last coordinate is the position in the row.
    """
    s = uintp(step)
    n = uintp(inner)
    nd = outer_dims.shape[0]
    last = coords.shape[1] - 1
    cap = coords.shape[0]
    idx = np.zeros(nd, np.int64)
    k = 0
    for r in range(starts.shape[1]):
        rem = r
        for d in range(nd - 1, -1, -1):
            idx[d] = rem % outer_dims[d]
            rem //= outer_dims[d]
        p = uintp(starts[0, r])
        for j in range(n):
            # branch-free compaction: write every candidate at slot k and advance k only past non-zeros
            # (a data-dependent branch mispredicts on every other element of random data)
            if k < cap:
                for d in range(nd):
                    coords[k, d] = idx[d]
                if last >= 0:
                    coords[k, last] = j
            k += load(a[p + j * s]) != 0
    return k


# --- Pad -----------------------------------------------------------------------------------------------
def _pairs(paddings: Sequence[Sequence[int]], ndim: int) -> list[tuple[int, int]]:
    pairs = [tuple(p) for p in paddings]
    if len(pairs) != ndim or any(len(p) != 2 for p in pairs):
        raise InvalidArgumentError(f"PadV3: paddings {list(paddings)} must be {ndim} (before, after) pairs, "
                                   f"one per dim of self")
    for p in pairs:
        for v in p:
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise InvalidArgumentError(f"PadV3: padding {v!r} must be an integer")
    return [(int(b), int(a)) for b, a in pairs]


def pad_shape(shape: Sequence[int], paddings: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """Output shape of a constant pad (negative paddings crop)."""
    out = tuple(n + b + a for n, (b, a) in zip(shape, _pairs(paddings, len(shape))))
    if any(n < 0 for n in out):
        raise InvalidArgumentError(f"PadV3: paddings {list(paddings)} crop self shape {list(shape)} below zero")
    return out


def scalar_storage(value: float | int | bool, dtype: DataType) -> np.ndarray:
    """A 1-element storage array holding `value` converted to dtype with Cast's semantics (integral values
    go through int64, others through float32)."""
    as_int = isinstance(value, (bool, int, np.integer)) or (dtype not in FLOAT_TYPES and float(value).is_integer())
    if as_int and dtype not in FLOAT_TYPES:
        src, src_dt = np.array([int(value)], np.int64), DataType.DT_INT64
    else:
        src, src_dt = np.array([value], np.float32), DataType.DT_FLOAT
    dst = np.empty(1, dtype.numpy_dtype)
    cast(src, dst, src_dt, dtype)
    return dst


def pad(self: np.ndarray, paddings: Sequence[Sequence[int]], value: float | int | bool, out: np.ndarray,
        dtype: "DataType | str") -> None:
    """out = self padded with `value`: paddings[d] = (before, after) elements for dim d, in dim order as
    PadV3's [ndim, 2] paddings tensor (negative values crop). `value` is converted to dtype like Cast."""
    dt = check_dtype(dtype, ALL_TYPES, "PadV3")
    a = kernel_view(self, dt, "PadV3", "self")
    o = kernel_view(out, dt, "PadV3", "out")
    want = pad_shape(a.shape, paddings)
    if o.shape != want:
        raise InvalidArgumentError(f"PadV3: out shape {list(o.shape)} must be {list(want)}")
    if o.size == 0:
        return
    fill = scalar_storage(value, dt).view(o.dtype)[0]
    pairs = _pairs(paddings, a.ndim)
    src, dst = [], []
    for n, (b, e) in zip(a.shape, pairs):
        lo, hi = max(0, -b), n - max(0, -e)
        if hi <= lo:  # everything cropped away along this dim: the output is all padding
            o.fill(fill)
            return
        src.append(slice(lo, hi))
        dst.append(slice(max(0, b), max(0, b) + hi - lo))
    if any(b > 0 or e > 0 for b, e in pairs):  # without growth the copy covers the whole output
        o.fill(fill)
    o[tuple(dst)] = a[tuple(src)]


# --- IndexPut ------------------------------------------------------------------------------------------
def index_put(self: np.ndarray, indices: Sequence[np.ndarray], values: np.ndarray, accumulate: bool,
              out: np.ndarray, dtype: "DataType | str") -> None:
    """out = self with out[indices] = values (or += with accumulate), like torch's index_put_ (L0 IndexPutV2).

    `indices` are k integer arrays (int64 or int32) indexing the first k dims of self; they broadcast
    together to a shape B, and `values` broadcasts to B + self.shape[k:]. Negative indices count from the
    end; an index out of range raises before anything is written. Without accumulate this is numpy's
    advanced-index assignment (a duplicate index keeps one of its values; numpy keeps the last); with
    accumulate every duplicate is added, in C order of B. `out` may be `self`.
    """
    dt = check_dtype(dtype, ALL_TYPES, "IndexPutV2")
    s = kernel_view(self, dt, "IndexPutV2", "self")
    o = kernel_view(out, dt, "IndexPutV2", "out")
    v = kernel_view(values, dt, "IndexPutV2", "values")
    if o.shape != s.shape:
        raise InvalidArgumentError(f"IndexPutV2: out shape {list(o.shape)} must equal self shape {list(s.shape)}")
    k = len(indices)
    if not 1 <= k <= s.ndim:
        raise InvalidArgumentError(f"IndexPutV2: got {k} index arrays for a {s.ndim}-D self; pass 1..{s.ndim}")
    for d, ix in enumerate(indices):
        if not isinstance(ix, np.ndarray) or ix.dtype not in (np.dtype(np.int64), np.dtype(np.int32)):
            got = ix.dtype if isinstance(ix, np.ndarray) else type(ix).__name__
            raise InvalidArgumentError(f"IndexPutV2: indices[{d}] must be an int64 or int32 array, got {got}")
    b_shape = broadcast_shape("IndexPutV2", *(ix.shape for ix in indices))
    sel = b_shape + tuple(s.shape[k:])
    fv, v_off, v_own = flat_view(v, False) if v.size else (None, 0, element_strides(v))
    v_str = broadcast_strides(v.shape, v_own, sel, "IndexPutV2", "values")
    for d, ix in enumerate(indices):  # checked before anything is written
        n = s.shape[d]
        if ix.size and (ix.min() < -n or ix.max() >= n):
            bad = ix[(ix < -n) | (ix >= n)].reshape(-1)[0]
            raise InvalidArgumentError(f"IndexPutV2: index {bad} in indices[{d}] is out of bounds for dim {d} "
                                       f"of size {n}")
    if not (o.strides == s.strides and o.__array_interface__["data"][0] == s.__array_interface__["data"][0]):
        np.copyto(o, s)  # out is not self itself (in-place is the usual call)
    nb = int(np.prod(b_shape, dtype=np.int64))
    if nb == 0 or o.size == 0:
        return
    if not accumulate:
        # plain assignment is numpy's advanced-index assignment (same broadcasting, last duplicate wins),
        # which benchmarks/numerics.py measures faster than a Numba row copy
        o[tuple(indices)] = v
        return
    idx = np.empty((k, nb), np.int64)
    for d, ix in enumerate(indices):
        idx[d] = np.broadcast_to(ix, b_shape).reshape(-1)
    fo, o_off, o_str = flat_view(o, True)
    nbd = len(b_shape)
    v_starts = row_starts(np.array(b_shape, np.int64), np.array(v_str[:nbd], np.int64).reshape(nbd, 1),
                          np.array([v_off], np.int64))
    t_plan = row_plan(sel[nbd:], [o_str[k:], v_str[nbd:]], [0, 0])
    _index_put_acc_kernel(fo, o_off, np.array(o_str[:k], np.int64), np.array(s.shape[:k], np.int64), idx, fv,
                          v_starts, t_plan.starts, t_plan.inner, t_plan.steps)


# --- NonZero -------------------------------------------------------------------------------------------
def count_non_zero(self: np.ndarray, dtype: "DataType | str") -> int:
    """Number of non-zero elements (NaN counts, -0.0 does not): NonZero's output row count."""
    dt = check_dtype(dtype, ALL_TYPES, "NonZero")
    a = kernel_view(self, dt, "NonZero", "self")
    if a.size == 0:
        return 0
    (fa,), plan = plan_operands(a.shape, [(a, None, False)])
    return int(_count_nonzero_kernel(fa, plan.starts, plan.inner, plan.steps))


def non_zero(self: np.ndarray, out: np.ndarray, dtype: "DataType | str") -> int:
    """Write the row-major coordinates of self's non-zero elements into out[:count] and return count
    (L0 NonZero: out is int64 [capacity, ndim], capacity >= count, typically self.size as the op
    allocates the upper bound; the op layer then sets the output shape to [count, ndim]). Rows from
    count on are scratch: the kernel may write there, as the device kernel may."""
    dt = check_dtype(dtype, ALL_TYPES, "NonZero")
    if not isinstance(out, np.ndarray) or out.dtype != np.int64 or out.ndim != 2 or out.shape[1] != self.ndim:
        got = f"{out.dtype} {list(out.shape)}" if isinstance(out, np.ndarray) else type(out).__name__
        raise InvalidArgumentError(f"NonZero: out must be an int64 array of shape [capacity, {self.ndim}], got {got}")
    count = count_non_zero(self, dt)
    if count > out.shape[0]:
        raise InvalidArgumentError(f"NonZero: {count} non-zero elements do not fit out with {out.shape[0]} rows; "
                                   f"allocate [self.size, ndim] = [{self.size}, {self.ndim}]")
    if count == 0:
        return 0
    if not out.flags.writeable:
        raise InvalidArgumentError("NonZero: out is read-only; pass a writable view of the output memory")
    a = kernel_view(self, dt, "NonZero", "self")
    fa, off, strides = flat_view(a, False)
    shape = a.shape if a.ndim else (1,)
    strides = strides if a.ndim else (0,)
    outer = np.array(shape[:-1], np.int64)
    starts = row_starts(outer, np.array(strides[:-1], np.int64).reshape(len(outer), 1), np.array([off], np.int64))
    target = out if out.flags.c_contiguous else np.empty(out.shape, np.int64)
    written = _nonzero_kernel(fa, starts, shape[-1], strides[-1], outer, target)
    if target is not out:
        out[:written] = target[:written]
    return int(written)
