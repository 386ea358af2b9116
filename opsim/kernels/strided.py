"""Row plans: walk strided and broadcast operands as rows of a single strided inner loop.

A kernel gets each operand as a 1-D raw view over the memory it spans, and a `RowPlan`: the flat offset of
every row's first element for every operand, the row length and each operand's step along a row. One
compiled kernel then serves every rank, memory layout and broadcast pattern, and the per-row bookkeeping
costs nothing per element. Adjacent dims that are contiguous for every operand are merged first, so a
contiguous (or simply broadcast) operation is a single row or a few long ones.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numba import njit
from numpy.lib.stride_tricks import as_strided

from opsim.errors import InvalidArgumentError


@dataclass(frozen=True)
class RowPlan:
    """Rows to walk: `starts[k, r]` is operand k's flat offset of row r; a row has `inner` elements, operand
    k advancing `steps[k]` elements per element (0 where it is broadcast)."""

    starts: np.ndarray
    inner: int
    steps: np.ndarray


def element_strides(arr: np.ndarray) -> tuple[int, ...]:
    """Strides of `arr` in elements (every view of typed device memory has whole-element strides)."""
    item = arr.itemsize
    out = []
    for s in arr.strides:
        if s % item:
            raise InvalidArgumentError(f"array strides {arr.strides} are not multiples of its itemsize {item}")
        out.append(s // item)
    return tuple(out)


def _flat_contiguous(arr: np.ndarray, writable: bool) -> np.ndarray:
    if writable and not arr.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writable view of the output memory")
    flat = arr.reshape(-1)
    flat.flags.writeable = writable
    return flat


def flat_view(arr: np.ndarray, writable: bool) -> tuple[np.ndarray, int, tuple[int, ...]]:
    """A 1-D view over the memory `arr` spans, the flat offset of its first element, its element strides.

    Inputs are returned read-only and outputs writable, so each kernel compiles once per element width
    whatever the caller's flags. `arr` must not be empty.
    """
    strides = element_strides(arr)
    if arr.flags.c_contiguous:  # the common case, and much cheaper than as_strided
        return _flat_contiguous(arr, writable), 0, strides
    if writable and not arr.flags.writeable:
        raise InvalidArgumentError("output array is read-only; pass a writable view of the output memory")
    corner = tuple(slice(n - 1, n) if s < 0 else slice(0, 1) for n, s in zip(arr.shape, strides))
    low = sum((n - 1) * s for n, s in zip(arr.shape, strides) if s < 0)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(arr.shape, strides))
    first = arr.reshape(1) if arr.ndim == 0 else arr[corner].reshape(1)  # arr[()] of 0-d would be a scalar
    flat = as_strided(first, shape=(span,), strides=(arr.itemsize,), writeable=writable)
    return flat, -low, strides


def broadcast_strides(shape: Sequence[int], strides: Sequence[int], target: Sequence[int], op: str,
                      name: str) -> tuple[int, ...]:
    """Strides that read an array of `shape` as if broadcast to `target` (0 along broadcast dims)."""
    shape, target = tuple(shape), tuple(target)
    if len(shape) > len(target):
        raise InvalidArgumentError(f"{op}: {name} shape {list(shape)} has more dims than the output {list(target)}")
    pad = len(target) - len(shape)
    out = [0] * pad
    for n, s, t in zip(shape, strides, target[pad:]):
        if n == t:
            out.append(s if n != 1 else 0)
        elif n == 1:
            out.append(0)
        else:
            raise InvalidArgumentError(
                f"{op}: {name} shape {list(shape)} does not broadcast to the output shape {list(target)}")
    return tuple(out)


def broadcast_shape(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """numpy/torch broadcasting of shapes (raises naming the op if they do not broadcast)."""
    first = tuple(shapes[0])
    if all(tuple(s) == first for s in shapes[1:]):
        return first
    try:
        return tuple(np.broadcast_shapes(*(tuple(s) for s in shapes)))
    except ValueError:
        raise InvalidArgumentError(
            f"{op}: shapes {[list(s) for s in shapes]} do not broadcast together") from None


def _coalesce(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge neighbours that are contiguous for every operand (C order kept)."""
    dims: list[int] = []
    strs: list[list[int]] = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        if dims and all(strs[-1][k] == n * st[d] for k, st in enumerate(strides)):
            dims[-1] *= n
            strs[-1] = [st[d] for st in strides]
        else:
            dims.append(n)
            strs.append([st[d] for st in strides])
    return dims, strs


@njit(cache=True, error_model="numpy")
def row_starts(outer_shape, outer_strides, offsets):
    """Flat offset of each row's first element, rows in C order of the outer dims (an odometer)."""
    nops = offsets.shape[0]
    nd = outer_shape.shape[0]
    rows = 1
    for d in range(nd):
        rows *= outer_shape[d]
    starts = np.empty((nops, rows), np.int64)
    idx = np.zeros(nd, np.int64)
    cur = offsets.copy()
    for r in range(rows):
        for k in range(nops):
            starts[k, r] = cur[k]
        d = nd - 1
        while d >= 0:
            idx[d] += 1
            for k in range(nops):
                cur[k] += outer_strides[d, k]
            if idx[d] < outer_shape[d]:
                break
            for k in range(nops):
                cur[k] -= outer_strides[d, k] * outer_shape[d]
            idx[d] = 0
            d -= 1
    return starts


def row_plan(shape: Sequence[int], strides: Sequence[Sequence[int]], offsets: Sequence[int],
             inner_dims: int = 0) -> RowPlan | None:
    """Plan rows over `shape` for operands with the given element strides and base offsets.

    inner_dims=0 lets the row be whatever dims merge; inner_dims=k makes a row exactly the last k dims (for
    ops that work per row, such as Softmax or RmsNorm), returning None if those dims do not merge into one
    strided run for every operand. `shape` must have no zero dim.
    """
    shape = list(shape)
    strides = [list(s) for s in strides]
    if inner_dims:
        split = len(shape) - inner_dims
        in_dims, in_strs = _coalesce(shape[split:], [s[split:] for s in strides])
        if len(in_dims) > 1:
            return None
        out_dims, out_strs = _coalesce(shape[:split], [s[:split] for s in strides])
        inner = in_dims[0] if in_dims else 1
        steps = in_strs[0] if in_strs else [0] * len(strides)
    else:
        dims, strs = _coalesce(shape, strides)
        if not dims:
            dims, strs = [1], [[0] * len(strides)]
        out_dims, out_strs = dims[:-1], strs[:-1]
        inner, steps = dims[-1], strs[-1]
    if out_dims:
        outer_shape = np.array(out_dims, dtype=np.int64)
        outer_strides = np.array(out_strs, dtype=np.int64).reshape(len(out_dims), len(strides))
        starts = row_starts(outer_shape, outer_strides, np.array(offsets, dtype=np.int64))
    else:
        starts = np.array(offsets, dtype=np.int64).reshape(len(strides), 1)
    return RowPlan(starts, int(inner), np.array(steps, dtype=np.int64))


# Shared plans of the single-row case. Kernels never write their plan arrays; these stay writable anyway,
# because a read-only array is another Numba type and would compile every kernel a second time.
_ZERO_STARTS = [np.zeros((n, 1), np.int64) for n in range(8)]
_UNIT_STEPS = [np.ones(n, np.int64) for n in range(8)]


def plan_operands(shape: Sequence[int], operands: Sequence[tuple[np.ndarray, Sequence[int] | None, bool]],
                  inner_dims: int = 0) -> tuple[list[np.ndarray], RowPlan | None]:
    """Flat views and a row plan for operands given as (array, strides over `shape` or None for the
    array's own strides, writable)."""
    nops = len(operands)
    if (not inner_dims and nops < len(_ZERO_STARTS)
            and all(st is None and arr.flags.c_contiguous for arr, st, _ in operands)):
        # every operand is C-contiguous in the iteration shape: a single row, no planning needed
        flats = [_flat_contiguous(arr, writable) for arr, _, writable in operands]
        return flats, RowPlan(_ZERO_STARTS[nops], flats[0].shape[0], _UNIT_STEPS[nops])
    flats, offsets, strides = [], [], []
    for arr, st, writable in operands:
        flat, off, own = flat_view(arr, writable)
        flats.append(flat)
        offsets.append(off)
        strides.append(own if st is None else st)
    return flats, row_plan(shape, strides, offsets, inner_dims)
