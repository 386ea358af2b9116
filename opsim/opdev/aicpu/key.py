"""The AI CPU task key (AicpuTaskSpace::GenTaskKey) and the input flattening it is built from.

A space caches initialised tasks under this key, so two L0 calls reuse a task exactly when their keys are
byte-equal: thread id, the low bytes of every non-null input's dtype and view format, '/', then the
attributes serialised by OpArg tag and silently cut at 1024 bytes. Shapes, data, placements, outputs and
the op type are deliberately not in it.

Failure convention: opbase writes the input bytes without a bound and overruns its 1024-byte buffer past
507 non-null inputs. `gen_task_key` returns None instead; the caller maps that to
ACLNN_ERR_PARAM_INVALID. Tags opbase rejects ("invalid attr arg type" / "invalid arg type") are skipped
exactly as in opbase and, when the caller passes an `invalid_tags` list, appended to it for logging.

Null payloads: opbase dereferences null strings, int/float arrays and tensor lists unchecked. Here a null
string or array attribute contributes no bytes, a null tensor-list attribute contributes its pointer
value 0, and a null tensor list among the inputs contributes no tensors.

The key is built on every AI CPU L0 call, so the code favours precomputed `struct` packers and one
bytearray over generality.
"""
from __future__ import annotations

import struct
from typing import Callable

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.tensor import IntArray, Scalar, Tensor, host_tensor
from opsim.opdev.op_args import OpArg, OpArgType
from opsim.kernels.hashing import gen_hash_binary

#: GenHashBinary's mixing constant (kHashSeed), as in opsim.kernels.hashing.
K_HASH_SEED = 0x9E3779B9


def _hash(key: bytes) -> int:
    """GenHashBinary through the Numba kernel, imported on first use so that loading a scenario that names
    AI CPU ops (``opsim validate``) does not import Numba."""
    global _hash
    _hash = gen_hash_binary
    return gen_hash_binary(key)

#: kAicpuKeyBufLen: bytes of a task key; attribute bytes past it are dropped.
K_AICPU_KEY_BUF_LEN = 1024
#: Byte written between the input descriptors and the attributes.
K_KEY_SEPARATOR = 0x2F
#: Bytes of the thread-id prefix.
K_KEY_THREAD_ID_LEN = 8
#: Most non-null inputs whose descriptors (2 bytes each) still fit with the thread id and '/'.
K_MAX_KEY_INPUTS = (K_AICPU_KEY_BUF_LEN - K_KEY_THREAD_ID_LEN - 1) // 2

_MASK64 = 0xFFFFFFFFFFFFFFFF
_pack_u64 = struct.Struct("<Q").pack
_pack_u32 = struct.Struct("<I").pack
_pack_f32 = struct.Struct("<f").pack
_pack_f64 = struct.Struct("<d").pack
_TRUE = b"\x01"
_FALSE = b"\x00"
_EMPTY = b""

T = OpArgType


def _pack_int(v, room: int) -> bytes:
    """OPARG_INT / OPARG_UINT: the 64-bit two's-complement value."""
    return _pack_u64(int(v) & _MASK64)


def _pack_bool(v, room: int) -> bytes:
    return _TRUE if v else _FALSE


def _pack_float(v, room: int) -> bytes:
    return _pack_f32(v)


def _pack_double(v, room: int) -> bytes:
    return _pack_f64(v)


def _pack_datatype(v, room: int) -> bytes:
    """op::DataType is a 4-byte enum."""
    return _pack_u32(int(v) & 0xFFFFFFFF)


def _pack_string(v, room: int) -> bytes:
    """Each character one byte, no length or terminator; the C string ends at its first NUL."""
    if v is None:
        return _EMPTY
    raw = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    nul = raw.find(0)
    return raw if nul < 0 else raw[:nul]


def _pack_int_list(v, room: int) -> bytes:
    """Each element as 8 bytes, no count; only the elements that can still fit are converted."""
    if v is None:
        return _EMPTY
    return v.values[:(room + 7) >> 3].astype("<i8", copy=False).tobytes()


def _pack_float_list(v, room: int) -> bytes:
    """Each element as 4 bytes IEEE single, no count."""
    if v is None:
        return _EMPTY
    return v.values[:(room + 3) >> 2].astype("<f4", copy=False).tobytes()


def _pack_tensor_list(v, room: int) -> bytes:
    """The list's pointer value: tensor lists are keyed by identity, not by contents."""
    return _pack_u64((v.pointer if v is not None else 0) & _MASK64)


#: AppendAttrForKey per OpArg tag; any tag missing here is an "invalid attr arg type".
ATTR_KEY_PACKERS: dict[OpArgType, Callable[[object, int], bytes]] = {
    T.OPARG_INT: _pack_int,
    T.OPARG_UINT: _pack_int,
    T.OPARG_BOOL: _pack_bool,
    T.OPARG_FLOAT: _pack_float,
    T.OPARG_DOUBLE: _pack_double,
    T.OPARG_DATATYPE: _pack_datatype,
    T.OPARG_STRING: _pack_string,
    T.OPARG_INT_LIST: _pack_int_list,
    T.OPARG_FLOAT_LIST: _pack_float_list,
    T.OPARG_ACLTENSOR_LIST: _pack_tensor_list,
}


def gen_task_key(thread_id: int, inputs: list[Tensor | None], attrs: list[OpArg],
                 invalid_tags: list[OpArgType] | None = None) -> bytes | None:
    """GenTaskKey: the task key bytes, or None when the input descriptors alone overflow 1024 bytes.

    `inputs` is the flattened input list (see `flatten_aicpu_inputs`), `attrs` the OP_ATTR OpArgs in order.
    Skipped attribute tags are appended to `invalid_tags` when it is given.
    """
    key = bytearray(_pack_u64(int(thread_id) & _MASK64))
    append = key.append
    count = 0
    for t in inputs:
        if t is not None:
            append(t.dtype & 0xFF)
            append(t.view_format & 0xFF)
            count += 1
    if count > K_MAX_KEY_INPUTS:
        return None
    append(K_KEY_SEPARATOR)
    get_packer = ATTR_KEY_PACKERS.get
    for tag, value in attrs:
        packer = get_packer(tag)
        if packer is None:
            if invalid_tags is not None:
                invalid_tags.append(tag)
            continue
        room = K_AICPU_KEY_BUF_LEN - len(key)
        if room > 0:
            key += packer(value, room)
        elif invalid_tags is None:
            break  # full, and nothing left to report
    if len(key) > K_AICPU_KEY_BUF_LEN:
        del key[K_AICPU_KEY_BUF_LEN:]
    return bytes(key)


def gen_task_key_and_seed(thread_id: int, inputs: list[Tensor | None], attrs: list[OpArg],
                          invalid_tags: list[OpArgType] | None = None) -> tuple[bytes, int] | None:
    """The key and its bucket seed GenHashBinary(key); None when the key cannot be built (see gen_task_key)."""
    key = gen_task_key(thread_id, inputs, attrs, invalid_tags)
    if key is None:
        return None
    return key, _hash(key)


_TAG_TENSOR = T.OPARG_ACLTENSOR

#: How the executor turns a scalar or int array into a host tensor it owns: (source, dtype) -> tensor.
MakeHostTensor = Callable[[Scalar | IntArray | None, DataType], Tensor | None]


def convert_to_host_tensor(source: Scalar | IntArray | None, dtype: DataType) -> Tensor:
    """A fresh host tensor (format ND) holding `source` as `dtype` (ConvertToTensor).

    A scalar becomes a 0-d tensor of its raw bytes, an int array a 1-D tensor. A null source becomes an
    empty 1-D tensor of `dtype`: opbase dereferences it, so there is no value to copy.
    """
    if source is None:
        return host_tensor(np.zeros(0, dtype=dtype.numpy_dtype), dtype)
    if isinstance(source, Scalar):
        raw = np.frombuffer(source.raw, dtype=source.dtype.numpy_dtype).reshape(())
        return host_tensor(raw, dtype)
    return host_tensor(source.values, dtype)


def flatten_aicpu_inputs(input_args: list[OpArg], make_host_tensor: MakeHostTensor = convert_to_host_tensor,
                         invalid_tags: list[OpArgType] | None = None) -> list[Tensor | None]:
    """CreateTensorList over the OP_INPUT OpArgs (GetOrCreateTask step 2).

    Tensors pass through (null kept); a scalar becomes a new host tensor of its dtype (DT_INT64 when null);
    an int array a new host DT_INT64 tensor; a tensor list its elements (null elements kept). Other tags are
    skipped and appended to `invalid_tags` when given. The new tensors come from `make_host_tensor`, so
    the executor that passes it owns them.
    """
    out: list[Tensor | None] = []
    for tag, value in input_args:
        if tag is _TAG_TENSOR or tag == _TAG_TENSOR:
            out.append(value)
        elif tag == T.OPARG_ACLTENSOR_LIST:
            if value is not None:
                out.extend(value.tensors)
        elif tag == T.OPARG_ACLSCALAR:
            out.append(make_host_tensor(value, value.dtype if value is not None else DataType.DT_INT64))
        elif tag == T.OPARG_INT_LIST:
            out.append(make_host_tensor(value, DataType.DT_INT64))
        elif invalid_tags is not None:
            invalid_tags.append(tag)
    return out


__all__ = [
    "K_AICPU_KEY_BUF_LEN", "K_HASH_SEED", "K_KEY_SEPARATOR", "K_KEY_THREAD_ID_LEN", "K_MAX_KEY_INPUTS",
    "ATTR_KEY_PACKERS", "MakeHostTensor", "gen_task_key", "gen_task_key_and_seed", "convert_to_host_tensor",
    "flatten_aicpu_inputs",
]
