"""torch_npu's key (pta-cache-mode.md §3): byte layouts of V1 and V2, the worked example, gen_hash vectors,
the 8192-byte overflow rule, and which call differences change the key."""
from __future__ import annotations

import struct

import pytest

from opsim.acl import IntArray, Scalar, Tensor, TensorList
from opsim.errors import InvalidArgumentError
from opsim.runtime.torch_npu import (G_HASH_OVERFLOW_OFFSET, HashBuffer, calc_hash_id, gen_hash, serialise,
                                     task_queue_setting)


def add_args(alpha=Scalar(1, "int64"), **kw):
    return (Tensor([2, 3], "float", **kw), Tensor([2, 3], "float", **kw), alpha, Tensor([2, 3], "float", **kw))


def test_gen_hash_vectors():
    assert gen_hash(b"aclnnAdd") == 0xac39f8d16958c1ed
    assert gen_hash(b"") == 0x8d946281f51d038f
    assert gen_hash(bytes(15)) == 9371257502052110381


def test_worked_example_v1_master():
    hb = serialise("aclnnAdd", add_args(), device=0, stream=0x1000)
    assert hb.offset == len(hb.buf) == 192
    assert calc_hash_id(hb) == 0x89b58c8c74cbe22d


def test_worked_example_v1_with_the_bool_deterministic_field_of_26_1_0():
    hb = serialise("aclnnAdd", add_args(), device=0, stream=0x1000, deterministic_bool=True)
    assert hb.offset == 189
    assert calc_hash_id(hb) == 0x084e646a50199a14


def test_worked_example_v2_is_200_bytes_with_57_byte_tensors_and_no_device():
    hb = serialise("aclnnAdd", add_args(), v2=True, device=0, stream=0x1000)
    assert hb.offset == 200
    tensor = hb.buf[4 + 8:4 + 8 + 57]
    assert tensor[16:20] == struct.pack("<i", 0) and tensor[20:21] == b","  # aclDataType (4 B), then ','
    assert serialise("aclnnAdd", add_args(), v2=True, device=3, stream=0x1000).buf == hb.buf


def test_v1_layout_field_by_field():
    b = bytes(serialise("aclnnAdd", add_args(), device=7, stream=0x1000).buf)
    assert b[:4] == struct.pack("<I", 0) and b[4:12] == b"aclnnAdd"
    t = b[12:66]
    assert t == struct.pack("<2q", 2, 3) + bytes([6]) + b"," + struct.pack("<2q", 3, 1) + struct.pack("<qqi", 0, 6, 2)
    assert b[120:129] == struct.pack("<q", 1) + bytes([4])  # Scalar(1) Long: value then ScalarType Long
    assert b[-9:] == bytes([7]) + struct.pack("<Q", 0x1000)  # device byte, stream pointer


def test_core_control_fields_v1_first_v2_after_the_deterministic_level():
    v1 = bytes(serialise("aclnnAdd", add_args(), core_control=(8, 16), deterministic_level=2).buf)
    assert v1[:12] == struct.pack("<III", 8, 16, 2)
    v2 = bytes(serialise("aclnnAdd", add_args(), v2=True, core_control=(8, 16), deterministic_level=2).buf)
    assert v2[:12] == struct.pack("<III", 2, 8, 16)
    unset = bytes(serialise("aclnnAdd", add_args(), v2=True, core_control=(0xFFFFFFFF, 16)).buf)
    assert unset[4:12] == b"aclnnAdd"


def test_addresses_are_pushed_per_defined_tensor_in_argument_order_and_not_hashed():
    args = add_args()
    for i, t in enumerate(args):
        if isinstance(t, Tensor):
            t.set_storage_address(0x1000 * (i + 1))
    pushed: list[int] = []
    hb = serialise("aclnnAdd", args + (None,), add_address=pushed.append)
    assert pushed == [0x1000, 0x2000, 0x4000] == hb.addresses
    assert hb.buf.endswith(b"," + bytes([0]) + bytes(8))  # None -> ',' only
    for t in args:
        if isinstance(t, Tensor):
            t.set_storage_address(0xdead0000)
    assert serialise("aclnnAdd", args + (None,)).buf == hb.buf


@pytest.mark.parametrize("change", ["stream", "device", "deterministic", "core", "alpha", "stride", "offset",
                                    "storage", "format"])
def test_differences_that_change_the_key(change):
    base = dict(device=0, stream=0x1000)
    args = add_args()
    kw = dict(base)
    if change == "stream":
        kw["stream"] = 0x2000
    elif change == "device":
        kw["device"] = 1
    elif change == "deterministic":
        kw["deterministic_level"] = 1
    elif change == "core":
        kw["core_control"] = (8, 16)
    elif change == "alpha":
        args = add_args(alpha=Scalar(2, "int64"))
    elif change == "stride":
        args = add_args(strides=(1, 2))
    elif change == "offset":
        args = add_args(view_offset=6, storage_shape=[12])
    elif change == "storage":
        args = add_args(storage_shape=[2, 4])
    elif change == "format":
        args = add_args(storage_format="NCHW")
    assert calc_hash_id(serialise("aclnnAdd", args, **kw)) != calc_hash_id(serialise("aclnnAdd", add_args(), **base))


def test_aliasing_is_not_in_the_key():
    a, b, alpha, out = add_args()
    assert serialise("aclnnAdd", (a, b, alpha, a)).buf == serialise("aclnnAdd", (a, b, alpha, out)).buf


def test_scalar_encodings():
    def enc(s):
        hb = HashBuffer()
        hb.scalar(s)
        return bytes(hb.buf)
    assert enc(Scalar(1.5, "float")) == struct.pack("<d", 1.5) + bytes([7])
    assert enc(Scalar(3, "int32")) == struct.pack("<q", 3) + bytes([4])
    assert enc(Scalar(True, "bool")) == bytes([1, 11])


def test_lists_arrays_and_strings():
    hb = HashBuffer()
    hb.value(IntArray([1, 2]))
    hb.value("mean")
    hb.value(TensorList([None]))
    assert bytes(hb.buf) == struct.pack("<3q", 1, 2, 2) + b"mean" + struct.pack("<q", 4) + b"," + struct.pack("<q", 1)


def test_overflow_is_sticky_and_hashes_to_zero():
    hb = HashBuffer()
    hb.put(bytes(8192))
    assert hb.offset == 8192 and calc_hash_id(hb) == gen_hash(bytes(8192))
    hb.put(b"x")
    assert hb.offset == G_HASH_OVERFLOW_OFFSET and calc_hash_id(hb) == 0
    hb.put(b"")
    assert hb.offset == G_HASH_OVERFLOW_OFFSET


def test_a_large_tensor_list_overflows():
    many = TensorList([Tensor([1] * 8) for _ in range(60)])
    hb = serialise("aclnnCat", (many,))
    assert hb.overflowed and calc_hash_id(hb) == 0 and len(hb.addresses) == 60


@pytest.mark.parametrize("env, expected", [({}, (1, True)), ({"TASK_QUEUE_ENABLE": "0"}, (1, False)),
                                           ({"TASK_QUEUE_ENABLE": "1"}, (1, True)),
                                           ({"TASK_QUEUE_ENABLE": "2"}, (2, True)),
                                           ({"TASK_QUEUE_ENABLE": "2", "ASCEND_LAUNCH_BLOCKING": "1"}, (1, False))])
def test_task_queue_enable_picks_variant_and_queue(env, expected):
    assert task_queue_setting(env) == expected


def test_task_queue_enable_outside_0_1_2_is_refused():
    with pytest.raises(InvalidArgumentError):
        task_queue_setting({"TASK_QUEUE_ENABLE": "3"})
