"""Shape, Storage, Tensor (view over a shared storage), host tensors and the host value types."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opsim.acl.tensor as tensor_mod
from opsim.acl import (MAX_DIM_NUM, BoolArray, DataType, FloatArray, Format, Fp16Array, IntArray, Placement,
                       Scalar, ScalarList, Shape, Storage, Tensor, TensorList, bf16_to_float32, host_tensor)
from opsim.acl.tensor import host_pointer, reset_host_pointers, validate_dims
from opsim.errors import InvalidArgumentError

D = DataType


# ---- Shape ------------------------------------------------------------------------------------------

def test_shape_numel_and_dims() -> None:
    assert Shape([2, 3, 4]).numel() == 24
    assert Shape([]).numel() == 1  # a scalar has one element
    assert Shape([5, 0, 7]).numel() == 0
    assert Shape((np.int64(2), 3)).dim_num == 2
    assert Shape([2, 3]) == (2, 3) and isinstance(Shape([2, 3])[0], int)
    assert repr(Shape([1, 2])) == "Shape([1, 2])"


def test_contiguous_strides() -> None:
    assert Shape([2, 3, 4]).contiguous_strides() == (12, 4, 1)
    assert Shape([]).contiguous_strides() == ()
    assert Shape([3, 0, 2]).contiguous_strides() == (2, 2, 1)  # a zero dim does not zero the outer strides


@given(st.lists(st.integers(0, 6), max_size=MAX_DIM_NUM))
@settings(max_examples=100, deadline=None)
def test_numel_is_the_product(dims: list[int]) -> None:
    assert Shape(dims).numel() == int(np.prod(dims, dtype=np.int64))


# ---- validation -------------------------------------------------------------------------------------

def test_negative_dim_is_rejected_naming_the_index() -> None:
    with pytest.raises(InvalidArgumentError, match=r"negative dimension at index 1"):
        validate_dims([2, -1, 3])
    with pytest.raises(InvalidArgumentError, match=r"view shape \[4, -2\] has a negative dimension at index 1"):
        Tensor([4, -2])
    with pytest.raises(InvalidArgumentError, match="storage shape"):
        Tensor([4], storage_shape=[-4])
    with pytest.raises(InvalidArgumentError, match="origin shape"):
        Tensor([4], origin_shape=[-1, 4])


def test_more_than_eight_dims_is_rejected() -> None:
    assert MAX_DIM_NUM == 8
    assert Tensor([1] * 8).view_shape.dim_num == 8
    with pytest.raises(InvalidArgumentError, match="has 9 dims; at most 8 are allowed"):
        Tensor([1] * 9)
    with pytest.raises(InvalidArgumentError, match="at most 8"):
        Tensor([2], storage_shape=[1] * 9)
    with pytest.raises(InvalidArgumentError, match="at most 8"):
        Tensor([2]).set_shape([1] * 9)


def test_strides_must_match_rank() -> None:
    with pytest.raises(InvalidArgumentError, match=r"strides \[1\] must have one entry per dimension"):
        Tensor([2, 3], strides=[1])


def test_bad_dtype_or_format_name_in_a_tensor_is_a_clear_error() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown dtype 'f32'.*accepted names"):
        Tensor([2], "f32")
    with pytest.raises(InvalidArgumentError, match="unknown format 'NZ'.*accepted names"):
        Tensor([2], "float", "NZ")


# ---- Tensor metadata --------------------------------------------------------------------------------

def test_defaults_and_parsed_fields() -> None:
    t = Tensor([2, 3], "fp16", "fractal_nz", name="x")
    assert t.dtype is D.DT_FLOAT16
    assert t.view_format is t.storage_format is t.origin_format is Format.FORMAT_FRACTAL_NZ
    assert t.view_shape == t.storage_shape == t.origin_shape == (2, 3)
    assert t.strides == (3, 1) and t.is_contiguous()
    assert t.placement is Placement.ON_DEVICE_HBM and not t.is_from_workspace
    assert t.numel() == 6 and t.nbytes == 12 and t.storage_nbytes == 12
    assert not t.is_empty() and Tensor([2, 0]).is_empty()
    assert "x" in repr(t) and "DT_FLOAT16" in repr(t)


def test_storage_nbytes_uses_storage_shape_and_rounds_sub_byte() -> None:
    t = Tensor([2, 3], D.DT_FLOAT, storage_shape=[1, 2, 16, 16], storage_format="FRACTAL_NZ")
    assert t.numel() == 6 and t.nbytes == 24
    assert t.storage_numel() == 512 and t.storage_nbytes == 2048
    assert Tensor([3], D.DT_INT4).storage_nbytes == 2
    assert Tensor([5], D.DT_FLOAT6_E2M3).storage_nbytes == 4
    assert Tensor([0, 4], D.DT_FLOAT).storage_nbytes == 0


def test_placement_enum() -> None:
    assert [int(p) for p in (Placement.ON_DEVICE_HBM, Placement.ON_HOST, Placement.FOLLOWING)] == [0, 1, 2]


def test_set_shape_resets_all_shapes_and_strides() -> None:
    t = Tensor([4, 4], strides=[1, 4], storage_shape=[16], origin_shape=[4, 4])
    t.set_shape([2, 5])
    assert t.view_shape == t.storage_shape == t.origin_shape == (2, 5)
    assert t.strides == (5, 1) and t.is_contiguous()


# ---- views and addresses (executor-and-memory.md §3) ------------------------------------------------

def test_view_shares_storage_with_its_base() -> None:
    base = Tensor([4, 4], D.DT_FLOAT, address=0x1000)
    view = Tensor([2, 4], D.DT_FLOAT, storage=base.storage, view_offset=8)
    assert view.storage is base.storage
    assert view.storage_shape == (2, 4)  # CreateView: the view's own storage shape is its shape
    assert view.data_address == 0x1000 + 8 * 4
    assert view.storage_address == base.storage_address == 0x1000
    base.set_storage_address(0x8000)  # binding the base rebinds every view
    assert view.storage_address == 0x8000
    assert view.data_address == 0x8000 + 8 * 4


def test_user_tensor_data_address_includes_storage_offset() -> None:
    t = Tensor([8], D.DT_FLOAT16, address=0x4000, view_offset=3)
    assert t.data_address == 0x4000 + 3 * 2
    t.storage.offset = 5
    assert t.data_address == 0x4000 + (3 + 5) * 2
    t.storage.workspace_offset = 4096  # ignored for a user tensor
    assert t.data_address == 0x4000 + (3 + 5) * 2
    assert t.storage_address == 0x4000


def test_workspace_tensor_data_address_uses_workspace_offset() -> None:
    base = Tensor([64], D.DT_INT64, address=0x10000, from_workspace=True)
    view = Tensor([8], D.DT_INT64, storage=base.storage, view_offset=3)
    assert base.is_from_workspace and view.is_from_workspace
    base.storage.workspace_offset = 512  # written once by the planner, shared by views
    base.storage.offset = 7  # ignored for a from-workspace tensor
    assert base.data_address == 0x10000 + 512
    assert view.data_address == 0x10000 + 512 + 3 * 8
    assert view.storage_address == 0x10000  # GetStorageAddr: the workspace base only


@given(address=st.integers(0, 1 << 40), offset=st.integers(0, 1 << 16), ws=st.integers(0, 1 << 20),
       view_offset=st.integers(0, 1 << 16), dtype=st.sampled_from([D.DT_FLOAT, D.DT_FLOAT16, D.DT_INT8,
                                                                   D.DT_INT64, D.DT_COMPLEX128]),
       from_ws=st.booleans())
@settings(max_examples=100, deadline=None)
def test_data_address_formula(address, offset, ws, view_offset, dtype, from_ws) -> None:
    t = Tensor([1], dtype, address=address, view_offset=view_offset, from_workspace=from_ws)
    t.storage.offset = offset
    t.storage.workspace_offset = ws
    size = dtype.type_size
    if from_ws:
        assert t.data_address == address + ws + view_offset * size
    else:
        assert t.data_address == address + (view_offset + offset) * size


def test_device_tensor_without_memory_has_no_data() -> None:
    t = Tensor([2])
    assert not t.has_data()
    with pytest.raises(InvalidArgumentError, match="has no data"):
        t.numpy()


def test_explicit_storage_is_used_as_given() -> None:
    st_ = Storage(address=0x99, placement=Placement.ON_HOST)
    t = Tensor([1], storage=st_)
    assert t.storage is st_ and t.placement is Placement.ON_HOST and t.storage_address == 0x99


# ---- host tensors -----------------------------------------------------------------------------------

@pytest.mark.parametrize("values,expected_dtype", [
    (np.arange(6, dtype=np.float32).reshape(2, 3), D.DT_FLOAT),
    (np.array([1.5, -2.0], dtype=np.float16), D.DT_FLOAT16),
    (np.array([[1, -2], [3, 4]], dtype=np.int64), D.DT_INT64),
    (np.array([7, 8], dtype=np.int32), D.DT_INT32),
    (np.array([True, False, True]), D.DT_BOOL),
    (np.array([2 ** 40], dtype=np.uint64), D.DT_UINT64),
    (np.array([1 + 2j], dtype=np.complex64), D.DT_COMPLEX64),
    ([0.25, 0.5], D.DT_DOUBLE),
    ([1, 2, 3], D.DT_INT64),
])
def test_host_tensor_round_trip(values, expected_dtype: DataType) -> None:
    t = host_tensor(values, name="h")
    arr = np.asarray(values)
    assert t.dtype is expected_dtype
    assert t.placement is Placement.ON_HOST and t.has_data()
    assert t.view_shape == arr.shape
    out = t.numpy()
    assert out.dtype == expected_dtype.numpy_dtype
    assert np.array_equal(out, arr)


def test_host_tensor_copies_its_input() -> None:
    src = np.array([1.0, 2.0], dtype=np.float32)
    t = host_tensor(src)
    src[0] = 99.0
    assert t.numpy().tolist() == [1.0, 2.0]


def test_host_tensor_converts_to_the_requested_dtype() -> None:
    t = host_tensor([1.7, -2.2, 3.0], "int32")
    assert t.dtype is D.DT_INT32 and t.numpy().tolist() == [1, -2, 3]
    h = host_tensor([1, 2], D.DT_FLOAT16, fmt="NCHW")
    assert h.numpy().dtype == np.float16 and h.view_format is Format.FORMAT_NCHW


def test_host_tensor_bf16_rounds_values_and_keeps_bits() -> None:
    t = host_tensor([1.5, 2.25, 1.0 + 2.0 ** -9], "bf16")
    assert t.numpy().dtype == np.uint16
    assert bf16_to_float32(t.numpy()).tolist() == [1.5, 2.25, 1.0]  # 1 + 2^-9 is a tie -> even (1.0)
    again = host_tensor(t.numpy(), "bf16")  # uint16 input is already bf16 bits
    assert np.array_equal(again.numpy(), t.numpy())


def test_host_tensor_rejects_unmapped_numpy_dtype() -> None:
    with pytest.raises(InvalidArgumentError, match="no DataType counterpart"):
        host_tensor(np.array(["a"]))


def test_host_tensor_strided_view_and_write() -> None:
    base = host_tensor(np.arange(6, dtype=np.int64).reshape(2, 3))
    transposed = Tensor([3, 2], D.DT_INT64, strides=[1, 3], storage=base.storage)
    assert not transposed.is_contiguous()
    assert np.array_equal(transposed.numpy(), np.arange(6).reshape(2, 3).T)
    tail = Tensor([2], D.DT_INT64, storage=base.storage, view_offset=4)
    assert tail.numpy().tolist() == [4, 5]
    tail.write(np.array([40, 50]))
    assert base.numpy().tolist() == [[0, 1, 2], [3, 40, 50]]  # views share bytes


# ---- TensorList, Scalar and the host arrays ---------------------------------------------------------

def test_tensor_list() -> None:
    a, b = Tensor([1]), Tensor([2])
    tl = TensorList([a, None, b])
    assert len(tl) == 3 and tl[0] is a and tl[1] is None and list(tl) == [a, None, b]
    assert TensorList().tensors == []
    assert tl.pointer != TensorList([a]).pointer


@pytest.mark.parametrize("value,dtype,expected", [
    (1.5, "float", 1.5), (-3, "int64", -3), (True, "bool", True), (2.5, D.DT_FLOAT16, 2.5),
    (1.0 + 2.0 ** -9, "bf16", 1.0), (300, "uint16", 300), (0.1, "double", 0.1),
])
def test_scalar_value_round_trip(value, dtype, expected) -> None:
    s = Scalar(value, dtype)
    assert s.value == expected
    assert len(s.raw) == s.dtype.type_size
    assert s.dtype.name in repr(s)


def test_host_arrays_copy_values_with_their_element_types() -> None:
    src = [1, 2, 3]
    ia = IntArray(src)
    src.append(4)
    assert list(ia) == [1, 2, 3] and len(ia) == 3 and ia.values.dtype == np.int64
    assert FloatArray([0.5]).values.dtype == np.float32
    assert BoolArray([1, 0]).values.tolist() == [True, False]
    assert Fp16Array([1.0]).values.dtype == np.float16
    assert repr(IntArray([7])) == "IntArray([7])"
    sl = ScalarList([Scalar(1.0), None])
    assert len(sl) == 2 and list(sl)[1] is None


def test_host_pointers_are_distinct_and_resettable() -> None:
    saved = tensor_mod._pointer_counter
    try:
        reset_host_pointers(0x1000)
        assert [host_pointer(), host_pointer()] == [0x1000, 0x1040]
        reset_host_pointers(0x1000)
        assert IntArray([1]).pointer == 0x1000  # a fresh simulation sees the same addresses
    finally:
        tensor_mod._pointer_counter = saved
