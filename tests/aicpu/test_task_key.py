"""The AI CPU task key: exact byte layout, 1024-byte truncation, identity keying, skipped tags and input
flattening (aicpu-tasks.md §5 step 2 and §7)."""
import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import BoolArray, DataType, FloatArray, Format, IntArray, Placement, Scalar, Tensor, TensorList
from opsim.kernels.hashing import gen_hash_binary
from opsim.opdev.aicpu.key import (K_AICPU_KEY_BUF_LEN, K_HASH_SEED, K_MAX_KEY_INPUTS, convert_to_host_tensor,
                                   flatten_aicpu_inputs, gen_task_key, gen_task_key_and_seed)
from opsim.opdev.op_args import (NULL_FLOAT_ARRAY, NULL_INT_ARRAY, NULL_SCALAR, NULL_STRING, NULL_TENSOR_LIST,
                                 OpArg, OpArgType, make_op_arg_context, op_attr, op_input)
from opsim.opdev.op_def import OpImplMode

T = OpArgType
KEY26 = bytes.fromhex("3930000000000000" "000201022f" "0100000000000000" "0000003f" "01")


def tensor(dtype="float32", fmt="ND", **kw) -> Tensor:
    return Tensor([2, 3], dtype, fmt, **kw)


def attrs(*values) -> list[OpArg]:
    return make_op_arg_context(op_attr(*values)).attrs()


def key(inputs, *attr_values, tid=12345, invalid=None):
    return gen_task_key(tid, inputs, attrs(*attr_values), invalid)


def test_constants():
    assert K_AICPU_KEY_BUF_LEN == 1024
    assert K_HASH_SEED == 0x9E3779B9
    assert K_MAX_KEY_INPUTS == 507


def test_reference_key_bytes_and_seed():
    x, y = tensor("float32"), tensor("float16")
    ctx = make_op_arg_context(op_input(x, y), op_attr(np.int64(1), np.float32(0.5), True))
    inputs = flatten_aicpu_inputs(ctx.inputs())
    k, seed = gen_task_key_and_seed(12345, inputs, ctx.attrs())
    assert k == KEY26
    assert seed == 0x00158A681ECDC631 == gen_hash_binary(k)


def test_only_attributes_are_bounded_the_thread_id_is_little_endian():
    k = key([], tid=0x0102030405060708)
    assert k == bytes([8, 7, 6, 5, 4, 3, 2, 1, 0x2F])


def test_null_inputs_are_skipped():
    x = tensor()
    assert key([None, x]) == key([x]) == key([x, None, None])
    assert key([None]) == key([])


def test_view_format_and_dtype_low_bytes_only():
    x = tensor("float16", "ND", storage_format="FRACTAL_NZ")
    assert key([x])[8:11] == bytes([DataType.DT_FLOAT16, Format.FORMAT_ND, 0x2F])
    y = tensor()
    y.dtype, y.view_format = 0x300 | DataType.DT_INT8, 0x100 | Format.FORMAT_NHWC  # sub-format bits above byte 0
    assert key([y])[8:10] == bytes([DataType.DT_INT8, Format.FORMAT_NHWC])


def test_shapes_placements_and_data_are_not_in_the_key():
    a = Tensor([2, 3], "float32")
    b = Tensor([7], "float32", placement=Placement.ON_HOST, address=0x1000)
    assert key([a]) == key([b])


def test_int_and_uint_attributes_are_both_8_bytes():
    assert key([], np.uint32(5)) == key([], np.int64(5)) == key([], 5)
    assert key([], np.uint32(0xFFFFFFFF))[9:] == b"\xff\xff\xff\xff\x00\x00\x00\x00"
    assert key([], np.int32(-1))[9:] == b"\xff" * 8
    assert key([], np.uint64(2**64 - 1)) == key([], -1)


def test_scalar_attribute_layouts():
    body = lambda *v: key([], *v)[9:]  # noqa: E731
    assert body(True) == b"\x01" and body(False) == b"\x00"
    assert body(np.float32(0.5)) == struct.pack("<f", 0.5)
    assert body(0.1) == struct.pack("<d", 0.1)  # a Python float is a C++ double
    assert body(DataType.DT_BF16) == struct.pack("<I", 27)
    assert body(Format.FORMAT_FRACTAL_NZ) == struct.pack("<q", 29)  # other enums are OPARG_INT
    assert body("ab") == b"ab"
    assert body("ab\0cd") == b"ab"  # the attribute is a C string
    assert body(NULL_STRING) == b""
    assert body(IntArray([1, -2])) == struct.pack("<qq", 1, -2)
    assert body(FloatArray([1.5, -2.0])) == struct.pack("<ff", 1.5, -2.0)
    assert body(NULL_INT_ARRAY, NULL_FLOAT_ARRAY) == b""


def test_tensor_lists_are_keyed_by_identity():
    x = tensor()
    a, b = TensorList([x]), TensorList([x])
    assert key([], a)[9:] == struct.pack("<Q", a.pointer)
    assert key([], a) == key([], a)
    assert key([], a) != key([], b)
    assert key([], NULL_TENSOR_LIST)[9:] == b"\x00" * 8


def test_bool_lists_scalars_tensors_and_impl_modes_contribute_nothing_and_are_reported():
    invalid: list = []
    k = key([], np.int64(3), BoolArray([True, False]), Scalar(1.0), tensor(), None, OpImplMode.IMPL_MODE_DEFAULT,
            invalid=invalid)
    assert k == key([], np.int64(3))
    assert invalid == [T.OPARG_BOOL_LIST, T.OPARG_ACLSCALAR, T.OPARG_ACLTENSOR, T.OPARG_ACLTENSOR,
                       T.OPARG_IMPLMODE]


def test_truncation_at_1024_bytes():
    x, y = tensor(), tensor("float16")
    values = list(range(1000, 1200))
    full = key([x, y], IntArray(values))
    assert 8 + 2 * 2 + 1 + 200 * 8 > K_AICPU_KEY_BUF_LEN
    assert len(full) == K_AICPU_KEY_BUF_LEN
    assert full[13:] == struct.pack("<200q", *values)[:1024 - 13]
    # Byte 1023 is the 3rd byte of element 126; element 127 starts beyond the bound.
    tail_changed = values[:127] + [-1] * 73
    assert key([x, y], IntArray(tail_changed)) == full
    inside_changed = values[:126] + [values[126] ^ 0x10000] + values[127:]
    assert key([x, y], IntArray(inside_changed)) != full
    # Attributes after a full key contribute nothing, but invalid tags are still reported.
    invalid: list = []
    assert key([x, y], IntArray(values), np.int64(7), BoolArray([True]), invalid=invalid) == full
    assert invalid == [T.OPARG_BOOL_LIST]


def test_too_many_inputs_is_rejected():
    many = [tensor()] * K_MAX_KEY_INPUTS
    k = key(many, np.int64(1))
    assert len(k) == 1024 and k[-1] == 1  # 8 + 2*507 + 1 = 1023: one attribute byte still fits
    assert key(many + [tensor()]) is None
    assert gen_task_key_and_seed(1, many + [tensor()], []) is None
    assert key(many + [None] * 10) is not None  # only non-null inputs count


def test_flatten_aicpu_inputs():
    x, y = tensor("float16"), tensor("int32")
    tl = TensorList([y, None])
    s = Scalar(2.5, "float16")
    arr = IntArray([4, 5, 6])
    invalid: list = []
    ctx = make_op_arg_context(op_input(x, None, s, arr, tl, NULL_SCALAR, NULL_TENSOR_LIST, True))
    flat = flatten_aicpu_inputs(ctx.inputs(), invalid_tags=invalid)
    assert flat[0] is x and flat[1] is None
    assert flat[2].dtype == DataType.DT_FLOAT16 and flat[2].placement == Placement.ON_HOST
    assert flat[2].view_format == Format.FORMAT_ND and float(flat[2].numpy()) == 2.5
    assert flat[3].dtype == DataType.DT_INT64 and flat[3].numpy().tolist() == [4, 5, 6]
    assert flat[4] is y and flat[5] is None
    assert flat[6].dtype == DataType.DT_INT64  # a null scalar converts as DT_INT64
    assert len(flat) == 7  # the null tensor list adds nothing
    assert invalid == [T.OPARG_BOOL]
    # Scalars and int arrays key by converted dtype and format ND.
    assert gen_task_key(0, flat, [])[8:] == bytes([1, 2, 1, 2, 9, 2, 3, 2, 9, 2, 0x2F])


def test_flatten_uses_the_callers_host_tensor_factory():
    calls = []

    def factory(source, dtype):
        calls.append((source, dtype))
        return convert_to_host_tensor(source, dtype)

    s, arr = Scalar(3, "int32"), IntArray([1])
    ctx = make_op_arg_context(op_input(s, arr, NULL_SCALAR))
    flat = flatten_aicpu_inputs(ctx.inputs(), factory)
    assert calls == [(s, DataType.DT_INT32), (arr, DataType.DT_INT64), (None, DataType.DT_INT64)]
    assert [t.dtype for t in flat] == [DataType.DT_INT32, DataType.DT_INT64, DataType.DT_INT64]
    # A factory failure (None) leaves a null input, which the key then skips.
    assert flatten_aicpu_inputs(ctx.inputs(), lambda src, dt: None) == [None, None, None]


def test_each_flatten_allocates_fresh_host_tensors():
    s = Scalar(1.0)
    ctx = make_op_arg_context(op_input(s))
    assert flatten_aicpu_inputs(ctx.inputs())[0] is not flatten_aicpu_inputs(ctx.inputs())[0]


# --- property: equal keys iff equal (thread, non-null input descriptors, attribute values) ----------------
DTYPES = [DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_INT64]
FORMATS = [Format.FORMAT_ND, Format.FORMAT_NCHW]
LISTS = [TensorList([]), TensorList([])]  # same contents, different identity
ATTR_KINDS = ["int", "uint", "bool", "float", "double", "dtype", "string", "int_list", "float_list",
              "tensor_list", "bool_list", "scalar"]


def attr_value(draw, kind, size):
    """A value of `kind` from a tiny domain (so equal draws are common) and its semantic identity."""
    if kind == "int":
        v = draw(st.sampled_from([0, 1, -1]))
        return np.int64(v), v & (2**64 - 1)
    if kind == "uint":
        v = draw(st.sampled_from([0, 1, 0xFFFFFFFF]))
        return np.uint32(v), v
    if kind == "bool":
        v = draw(st.booleans())
        return v, v
    if kind == "float":
        v = np.float32(draw(st.sampled_from([0.5, 0.0, -0.0, 2.0])))
        return v, int(v.view(np.uint32))  # IEEE bits: 0.0 and -0.0 differ
    if kind == "double":
        v = draw(st.sampled_from([0.5, 0.0, -0.0]))
        return v, struct.unpack("<Q", struct.pack("<d", v))[0]
    if kind == "dtype":
        v = draw(st.sampled_from(DTYPES))
        return v, int(v)
    if kind == "string":
        v = draw(st.text(alphabet="ab", min_size=size, max_size=size))
        return v, v
    if kind == "int_list":
        v = draw(st.lists(st.sampled_from([0, 1, -3]), min_size=size, max_size=size))
        return IntArray(v), tuple(v)
    if kind == "float_list":
        v = draw(st.lists(st.sampled_from([0.0, 1.5]), min_size=size, max_size=size))
        return FloatArray(v), tuple(v)
    if kind == "tensor_list":
        i = draw(st.integers(0, 1))
        return LISTS[i], i
    if kind == "bool_list":
        return BoolArray(draw(st.lists(st.booleans(), max_size=3))), None  # contributes nothing
    return Scalar(draw(st.sampled_from([1.0, 2.0]))), None  # a scalar attribute contributes nothing


@st.composite
def argument_set(draw, schema):
    tid = draw(st.sampled_from([1, 2]))
    descs = draw(st.lists(st.one_of(st.none(), st.tuples(st.sampled_from(DTYPES), st.sampled_from(FORMATS))),
                          max_size=4))
    inputs = [None if d is None else tensor(d[0], d[1]) for d in descs]
    values, identity = [], []
    for kind, size in schema:
        v, ident = attr_value(draw, kind, size)
        values.append(v)
        identity.append(ident)
    semantic = (tid, tuple(d for d in descs if d is not None), tuple(identity))
    return tid, inputs, values, semantic


@st.composite
def argument_pair(draw):
    # One op: both calls pass the same attribute kinds, with fixed list/string lengths (an op's signature).
    schema = draw(st.lists(st.tuples(st.sampled_from(ATTR_KINDS), st.integers(0, 3)), max_size=6))
    a = draw(argument_set(schema))
    b = draw(argument_set(schema))
    if draw(st.booleans()):  # often the same call again, with null inputs moved around
        tid, inputs, values, semantic = a
        moved = [t for t in inputs if t is not None]
        for pos in draw(st.lists(st.integers(0, len(moved)), max_size=3)):
            moved.insert(pos, None)
        b = (tid, moved, values, semantic)
    return a, b


@settings(max_examples=300, deadline=None)
@given(argument_pair())
def test_equal_keys_iff_equal_arguments(pair):
    (tid_a, in_a, vals_a, sem_a), (tid_b, in_b, vals_b, sem_b) = pair
    ka = gen_task_key(tid_a, in_a, attrs(*vals_a))
    kb = gen_task_key(tid_b, in_b, attrs(*vals_b))
    assert len(ka) < K_AICPU_KEY_BUF_LEN  # the property is about keys within the bound
    assert (ka == kb) == (sem_a == sem_b)
