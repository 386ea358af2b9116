"""The OpExecCache key: L2_DFX_PHASE_1's byte layout (opbase `include/nnopbase/opdev/op_dfx.h`,
`common/utils/op_cache.cpp`) and the fast path's key memo.

A key is the API name and its length, aicNum, aivNum and the deterministic level, then every DFX_IN / DFX_OUT
element, then the aliasing labels of the tensors; longer than 8192 bytes it is empty (not cacheable). The memo
(`args_snapshot` / `args_unchanged`) lets a repeated call with unchanged arguments reuse the bytes.
"""
from __future__ import annotations

import struct
from operator import attrgetter, call, is_
from typing import Any

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.tensor import (ASSIGNMENTS, BoolArray, FloatArray, Fp16Array, IntArray, Scalar, ScalarList, Tensor,
                              TensorList)
from opsim.opdev.op_args import Null

K_HASH_BUF_SIZE = 8192
_COMMA = b","
_Q = struct.Struct("<q")
_I = struct.Struct("<i")


# ---- key construction (§4) -----------------------------------------------------------------------

_TENSOR_KEYS: dict[tuple, bytes] = {}
"""Key bytes of one tensor, memoised on the fields that enter them (a cache hit rebuilds the same bytes)."""
_TENSOR_KEYS_MAX = 4096
_HEADS: dict[tuple, bytes] = {}
"""Key prefix (API name, its length, aicNum, aivNum, deterministic level) per tuple of those values."""


def _tensor_key(fields: tuple) -> bytes:
    vs, strides, ss, dtype, view_offset, view_format = fields
    nd = len(vs)
    part = b"".join((
        struct.pack(f"<{nd}q", *vs), _COMMA, struct.pack(f"<{nd}q", *strides), _COMMA,
        struct.pack(f"<{len(ss)}q", *ss), _COMMA, _I.pack(int(dtype)), _COMMA, _Q.pack(view_offset),
        _COMMA, _I.pack(int(view_format))))
    if len(_TENSOR_KEYS) >= _TENSOR_KEYS_MAX:
        _TENSOR_KEYS.clear()
    _TENSOR_KEYS[fields] = part
    return part


class _KeyBuilder:
    """Appends DFX_IN / DFX_OUT elements to a key, collecting L2 storages, tensors and aliasing labels."""

    __slots__ = ("parts", "storages", "tensors", "labels", "_seen")

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.storages: list = []
        self.tensors: list[Tensor] = []
        self.labels: list[int] = []
        self._seen: dict[int, int] = {}

    def tensor(self, t: Tensor | None) -> None:
        if t is None:
            self.parts.append(_COMMA)
            return
        fields = (t.view_shape, t.strides, t.storage_shape, t.dtype, t.view_offset, t.view_format)
        part = _TENSOR_KEYS.get(fields)
        if part is None:
            part = _tensor_key(fields)
        self.parts.append(part)
        self.storages.append(t.storage)
        self.tensors.append(t)
        label = self._seen.setdefault(id(t), len(self._seen))
        self.labels.append(label)

    def scalar(self, s: Scalar | None) -> None:
        if s is None:
            self.parts.append(_COMMA)
            return
        self.parts.append(s.raw + _COMMA + _I.pack(int(s.dtype)) + _COMMA)

    def value(self, v: Any) -> None:
        p = self.parts
        if v is None:
            p.append(_COMMA)
        elif isinstance(v, Tensor):
            self.tensor(v)
        elif isinstance(v, Scalar):
            self.scalar(v)
        elif isinstance(v, (IntArray, BoolArray, FloatArray, Fp16Array)):
            p.append(v.values.tobytes() + _Q.pack(len(v.values)))
        elif isinstance(v, TensorList):
            for t in v.tensors:
                self.tensor(t)
            p.append(_Q.pack(len(v.tensors)))
        elif isinstance(v, ScalarList):
            for s in v.scalars:
                self.scalar(s)
            p.append(_Q.pack(len(v.scalars)))
        elif isinstance(v, Null):
            p.append(_COMMA)
        elif isinstance(v, str):  # const char*: characters then length
            b = v.encode()
            p.append(b + _Q.pack(len(b)))
        elif isinstance(v, (bool, np.bool_)):
            p.append(b"\x01" if v else b"\x00")
        elif isinstance(v, DataType):
            p.append(_I.pack(int(v)))
        elif isinstance(v, np.generic):
            p.append(v.tobytes())
        elif isinstance(v, int) and type(v) is not int:  # other enums: 4-byte C enums
            p.append(_I.pack(int(v)))
        elif isinstance(v, int):
            p.append(_Q.pack(v))
        elif isinstance(v, float):
            p.append(struct.pack("<d", v))
        else:
            p.append(struct.pack("<Q", id(v) & 0xFFFFFFFFFFFFFFFF))  # unlisted pointers: keyed by identity


def build_l2_key(api_name: str, aic_num: int, aiv_num: int, deterministic_level: int,
                 dfx_in: tuple, dfx_out: tuple, *, memo: dict | None = None) -> tuple[bytes, list, list]:
    """The L2 key bytes (empty when longer than 8192 bytes), the L2 storages and the L2 tensors.

    `memo` (the fast path; one dict per simulation, `ProcessContext.key_memo`): a result is reused for the
    same (API, aicNum, aivNum, deterministic level) and the same argument objects while every field that
    enters the key is unchanged. The memo holds the arguments, so their ids cannot be reused meanwhile."""
    head_fields = (api_name, aic_num, aiv_num, deterministic_level)
    if memo is None:
        return _build_l2_key(head_fields, dfx_in, dfx_out)
    args = dfx_in + dfx_out
    memo_key = (head_fields, tuple(map(id, args)))
    last = memo.get(memo_key)
    if last is not None and args_unchanged(last[0], args):
        return last[1]
    result = _build_l2_key(head_fields, dfx_in, dfx_out)
    snapshot = args_snapshot(args)
    if snapshot is not None:
        if len(memo) >= KEY_MEMO_MAX:
            memo.clear()
        memo[memo_key] = (snapshot, result)
    return result


KEY_MEMO_MAX = 4096
"""Entries of a simulation's phase-1 key memo before it is emptied (distinct argument sets in use)."""
_VALUE_TYPES = (type(None), int, bool, str, DataType, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_)
_ARRAY_TYPES = (IntArray, BoolArray, FloatArray, Fp16Array)
_tensor_key_fields = attrgetter("view_shape", "strides", "storage_shape", "dtype", "view_offset", "view_format",
                                "storage")
"""A tensor's fields that enter the key, in one C call: the shapes and strides are immutable tuples and the
enums and offset plain values, so equal fields give equal key bytes; the storage compares by identity."""
_scalar_key_fields = attrgetter("raw", "dtype")
_version = attrgetter("version")


def _array_key_fields(v: Any) -> tuple:
    """A host array's values array, their dtype and bytes (the array can be changed in place)."""
    return v.values, v.values.dtype, v.values.tobytes()


def args_snapshot(args: tuple, tensor_fields: Any = None) -> tuple | None:
    """What the key bytes and storages of `args` come from: (number of arguments, the positions, objects,
    field readers and fields of the tensors, scalars and host arrays, the immutable values with their
    positions and types, the objects' versions); None when an argument's key bytes could change without such a
    change (an unlisted object: not memoised). `tensor_fields`: a reader of more tensor fields than the key's
    (a caller that depends on more of each tensor). The versions (a list, None when a host array or
    `tensor_fields` reaches beyond what a version covers: the count of assignments, then one per object) let
    `fields_unchanged` skip reading the fields."""
    pos, objs, getters, values = [], [], [], []
    tensor_getter = tensor_fields or _tensor_key_fields
    versioned = tensor_fields is None
    for i, v in enumerate(args):
        tv = type(v)
        if tv is Tensor:
            getter = tensor_getter
        elif tv is Scalar:
            getter = _scalar_key_fields
        elif tv in _ARRAY_TYPES:
            getter = _array_key_fields
            versioned = False
        elif tv in _VALUE_TYPES or tv is float:
            values.append((i, tv, v))
            continue
        else:
            return None
        pos.append(i)
        objs.append(v)
        getters.append(getter)
    getters_t = tuple(getters)
    objs_t = tuple(objs)
    versions = [ASSIGNMENTS[0], *map(_version, objs_t)] if versioned else None
    return (len(args), tuple(pos), objs_t, getters_t, tuple(map(call, getters_t, objs_t)), tuple(values), versions)


def fields_unchanged(snapshot: tuple) -> bool:
    """The snapshot's tensors, scalars and host arrays still have the fields they had: at once when no field of
    any tensor or scalar was assigned since the snapshot last matched (its versions: the count of assignments
    then, the objects' versions) or none of its own objects', else by comparing the fields (C calls only),
    after which the versions of a match are the snapshot's."""
    versions = snapshot[6]
    if versions is not None:
        if versions[0] == ASSIGNMENTS[0]:
            return True
        if versions[1:] == list(map(_version, snapshot[2])):
            versions[0] = ASSIGNMENTS[0]
            return True
    if tuple(map(call, snapshot[3], snapshot[2])) != snapshot[4]:
        return False
    if versions is not None:
        versions[:] = [ASSIGNMENTS[0], *map(_version, snapshot[2])]
    return True


def args_unchanged(snapshot: tuple, args: tuple) -> bool:
    """The arguments are the snapshot's objects with the same fields, and its immutable values (equal values of
    the same type; floats only as the same object: 0.0 == -0.0 but their bytes differ)."""
    n, pos, objs, _, _, values, _ = snapshot
    if len(args) != n or not all(map(is_, objs, map(args.__getitem__, pos))):
        return False
    for i, tv, v in values:
        a = args[i]
        if a is not v and (type(a) is not tv or tv is float or a != v):
            return False
    return fields_unchanged(snapshot)


def _build_l2_key(head_fields: tuple, dfx_in: tuple, dfx_out: tuple) -> tuple[bytes, list, list]:
    kb = _KeyBuilder()
    parts = kb.parts
    head = _HEADS.get(head_fields)
    if head is None:
        api_name, aic_num, aiv_num, deterministic_level = head_fields
        name = api_name.encode()
        head = _HEADS[head_fields] = name + _Q.pack(len(name)) + struct.pack(
            "<IIB", aic_num & 0xFFFFFFFF, aiv_num & 0xFFFFFFFF, deterministic_level & 0xFF)
        if len(_HEADS) > _TENSOR_KEYS_MAX:
            _HEADS.clear()
    parts.append(head)
    storages, tensors, labels, seen = kb.storages, kb.tensors, kb.labels, kb._seen
    for args in (dfx_in, dfx_out):
        for v in args:
            if type(v) is Tensor:  # the common case, inlined (KeyBuilder.tensor)
                fields = (v.view_shape, v.strides, v.storage_shape, v.dtype, v.view_offset, v.view_format)
                part = _TENSOR_KEYS.get(fields)
                parts.append(part if part is not None else _tensor_key(fields))
                storages.append(v.storage)
                tensors.append(v)
                labels.append(seen.setdefault(id(v), len(seen)))
            else:
                kb.value(v)
    if labels:
        parts.append(struct.pack(f"<{len(labels)}q", *labels))
    key = b"".join(parts)
    if len(key) > K_HASH_BUF_SIZE:
        key = b""
    return key, kb.storages, kb.tensors
