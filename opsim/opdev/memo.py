"""Memos of the fast path keyed by argument identity: a result is reused only while its inputs are unchanged.

Phase 1 of a call that misses the OpExecCache (and of every AI CPU call) recomputes values that depend only
on the arguments' descriptors: the tiling of a launch, its predicted duration and tensor description. The
memos here keep such a value with a snapshot of every tensor field it could have read (the identity of each
field object: shapes are immutable tuples and a setter replaces them) and reuse it only while every field is
still the same object. Each memo belongs to one simulation (`ProcessContext.launch_memo`, None on the
reference path) and is emptied when it grows past `MEMO_MAX` entries.
"""
from __future__ import annotations

import math
from typing import Any

from opsim.acl.tensor import Tensor

MEMO_MAX = 4096
"""Entries of one memo before it is emptied (distinct argument sets in use at once)."""


def tensor_state(t: Tensor | None) -> tuple | None:
    """Every descriptor field of `t` a shape-level computation can read, as the field objects themselves."""
    if t is None:
        return None
    st = t.storage
    return (t, t.view_shape, t.strides, t.view_offset, t.dtype, t.view_format, t.storage_shape, t.storage_format,
            t.origin_shape, t.origin_format, st, st.placement, st.from_workspace)


def same_state(state: tuple | None, t: Tensor | None) -> bool:
    """`t` is the snapshot's tensor with every field still the snapshot's object."""
    if state is None:
        return t is None
    if t is not state[0]:
        return False
    st = t.storage
    return (t.view_shape is state[1] and t.strides is state[2] and t.view_offset == state[3]
            and t.dtype is state[4] and t.view_format is state[5] and t.storage_shape is state[6]
            and t.storage_format is state[7] and t.origin_shape is state[8] and t.origin_format is state[9]
            and st is state[10] and st.placement is state[11] and st.from_workspace is state[12])


def tensors_state(tensors: list) -> tuple | None:
    """Snapshots of a list of tensors (None kept); None when an element is not a tensor."""
    out = []
    for t in tensors:
        if t is not None and type(t) is not Tensor:
            return None
        out.append(tensor_state(t))
    return tuple(out)


def same_tensors(states: tuple, tensors: list) -> bool:
    if len(states) != len(tensors):
        return False
    for s, t in zip(states, tensors):
        if not same_state(s, t):
            return False
    return True


_PLAIN = (int, str, type(None))


def value_key(values: list) -> tuple | None:
    """A hashable key equal only for values that behave identically: plain ints, strings and None by value,
    floats by value and sign (0.0 == -0.0); None when a value is of another (possibly mutable) type."""
    out: list[Any] = []
    for v in values:
        tv = type(v)
        if tv is float:
            out.append((tv, v, math.copysign(1.0, v)))
        elif tv in _PLAIN:
            out.append((tv, v))
        else:
            return None
    return tuple(out)


def find(memo: dict, key: Any, owners: tuple, ins: list, outs: list) -> Any:
    """The value kept for `key` when it was computed by the same `owners` (compared by identity: a kernel, a
    cost function) from `ins` / `outs` with every descriptor field unchanged; None otherwise."""
    entry = memo.get(key)
    if entry is None:
        return None
    held, ins_state, outs_state, value = entry
    for a, b in zip(held, owners):
        if a is not b:
            return None
    if same_tensors(ins_state, ins) and same_tensors(outs_state, outs):
        return value
    return None


def keep(memo: dict, key: Any, owners: tuple, ins: list, outs: list, value: Any) -> None:
    """Keep `value` for `find` (not when an argument is not a tensor: nothing to snapshot)."""
    ins_state, outs_state = tensors_state(ins), tensors_state(outs)
    if ins_state is not None and outs_state is not None:
        put(memo, key, (owners, ins_state, outs_state, value))


def put(memo: dict, key: Any, value: Any) -> None:
    """Store in a bounded memo."""
    if len(memo) >= MEMO_MAX:
        memo.clear()
    memo[key] = value
