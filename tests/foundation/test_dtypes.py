"""DataType / Format numbering, element sizes, numpy storage, parsing, and the bf16/fp16 helpers."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import (DataType, Format, bf16_to_float32, float32_to_bf16, float32_to_fp16, fp16_to_float32,
                       from_compute, to_compute)
from opsim.acl.dtypes import DATA_TYPE_SIZE_BIT_OFFSET, FLOATING_CHECK_TYPES
from opsim.errors import InvalidArgumentError

D = DataType

# ge::DataType numbering (graph/types.h); 5 is reserved.
DTYPE_NUMBERS = {
    "DT_FLOAT": 0, "DT_FLOAT16": 1, "DT_INT8": 2, "DT_INT32": 3, "DT_UINT8": 4, "DT_INT16": 6, "DT_UINT16": 7,
    "DT_UINT32": 8, "DT_INT64": 9, "DT_UINT64": 10, "DT_DOUBLE": 11, "DT_BOOL": 12, "DT_STRING": 13,
    "DT_DUAL_SUB_INT8": 14, "DT_DUAL_SUB_UINT8": 15, "DT_COMPLEX64": 16, "DT_COMPLEX128": 17, "DT_QINT8": 18,
    "DT_QINT16": 19, "DT_QINT32": 20, "DT_QUINT8": 21, "DT_QUINT16": 22, "DT_RESOURCE": 23, "DT_STRING_REF": 24,
    "DT_DUAL": 25, "DT_VARIANT": 26, "DT_BF16": 27, "DT_UNDEFINED": 28, "DT_INT4": 29, "DT_UINT1": 30,
    "DT_INT2": 31, "DT_UINT2": 32, "DT_COMPLEX32": 33, "DT_HIFLOAT8": 34, "DT_FLOAT8_E5M2": 35,
    "DT_FLOAT8_E4M3FN": 36, "DT_FLOAT8_E8M0": 37, "DT_FLOAT6_E3M2": 38, "DT_FLOAT6_E2M3": 39,
    "DT_FLOAT4_E2M1": 40, "DT_FLOAT4_E1M2": 41, "DT_MAX": 42,
}

# ge's GetSizeByDataType: bytes, 1000 + bits for sub-byte types, -1 where undefined.
TYPE_SIZES = {
    "DT_FLOAT": 4, "DT_FLOAT16": 2, "DT_INT8": 1, "DT_INT32": 4, "DT_UINT8": 1, "DT_INT16": 2, "DT_UINT16": 2,
    "DT_UINT32": 4, "DT_INT64": 8, "DT_UINT64": 8, "DT_DOUBLE": 8, "DT_BOOL": 1, "DT_STRING": -1,
    "DT_DUAL_SUB_INT8": 1, "DT_DUAL_SUB_UINT8": 1, "DT_COMPLEX64": 8, "DT_COMPLEX128": 16, "DT_QINT8": 1,
    "DT_QINT16": 2, "DT_QINT32": 4, "DT_QUINT8": 1, "DT_QUINT16": 2, "DT_RESOURCE": 8, "DT_STRING_REF": -1,
    "DT_DUAL": 5, "DT_VARIANT": 8, "DT_BF16": 2, "DT_UNDEFINED": -1, "DT_INT4": 1004, "DT_UINT1": 1001,
    "DT_INT2": 1002, "DT_UINT2": 1002, "DT_COMPLEX32": 4, "DT_HIFLOAT8": 1, "DT_FLOAT8_E5M2": 1,
    "DT_FLOAT8_E4M3FN": 1, "DT_FLOAT8_E8M0": 1, "DT_FLOAT6_E3M2": 1006, "DT_FLOAT6_E2M3": 1006,
    "DT_FLOAT4_E2M1": 1004, "DT_FLOAT4_E1M2": 1004, "DT_MAX": -1,
}

# How opsim stores elements: the native numpy type, or raw unsigned ints of the right width.
NUMPY_STORAGE = {
    "DT_FLOAT": np.float32, "DT_FLOAT16": np.float16, "DT_DOUBLE": np.float64, "DT_INT8": np.int8,
    "DT_INT16": np.int16, "DT_INT32": np.int32, "DT_INT64": np.int64, "DT_UINT8": np.uint8,
    "DT_UINT16": np.uint16, "DT_UINT32": np.uint32, "DT_UINT64": np.uint64, "DT_BOOL": np.bool_,
    "DT_COMPLEX64": np.complex64, "DT_COMPLEX128": np.complex128, "DT_COMPLEX32": np.uint32,
    "DT_BF16": np.uint16, "DT_HIFLOAT8": np.uint8, "DT_FLOAT8_E5M2": np.uint8, "DT_FLOAT8_E4M3FN": np.uint8,
    "DT_FLOAT8_E8M0": np.uint8, "DT_FLOAT6_E3M2": np.uint8, "DT_FLOAT6_E2M3": np.uint8,
    "DT_FLOAT4_E2M1": np.uint8, "DT_FLOAT4_E1M2": np.uint8, "DT_INT4": np.uint8, "DT_UINT1": np.uint8,
    "DT_INT2": np.uint8, "DT_UINT2": np.uint8,
}

FORMAT_NUMBERS = {
    "NCHW": 0, "NHWC": 1, "ND": 2, "NC1HWC0": 3, "FRACTAL_Z": 4, "NC1C0HWPAD": 5, "NHWC1C0": 6, "FSR_NCHW": 7,
    "FRACTAL_DECONV": 8, "C1HWNC0": 9, "FRACTAL_DECONV_TRANSPOSE": 10, "FRACTAL_DECONV_SP_STRIDE_TRANS": 11,
    "NC1HWC0_C04": 12, "FRACTAL_Z_C04": 13, "CHWN": 14, "FRACTAL_DECONV_SP_STRIDE8_TRANS": 15, "HWCN": 16,
    "NC1KHKWHWC0": 17, "BN_WEIGHT": 18, "FILTER_HWCK": 19, "HASHTABLE_LOOKUP_LOOKUPS": 20,
    "HASHTABLE_LOOKUP_KEYS": 21, "HASHTABLE_LOOKUP_VALUE": 22, "HASHTABLE_LOOKUP_OUTPUT": 23,
    "HASHTABLE_LOOKUP_HITS": 24, "C1HWNCoC0": 25, "MD": 26, "NDHWC": 27, "FRACTAL_ZZ": 28, "FRACTAL_NZ": 29,
    "NCDHW": 30, "DHWCN": 31, "NDC1HWC0": 32, "FRACTAL_Z_3D": 33, "CN": 34, "NC": 35, "DHWNC": 36,
    "FRACTAL_Z_3D_TRANSPOSE": 37, "FRACTAL_ZN_LSTM": 38, "FRACTAL_Z_G": 39, "RESERVED": 40, "ALL": 41,
    "NULL": 42, "ND_RNN_BIAS": 43, "FRACTAL_ZN_RNN": 44, "NYUV": 45, "NYUV_A": 46, "NCL": 47,
}


# ---- DataType ---------------------------------------------------------------------------------------

def test_datatype_numbering_matches_ge_exactly() -> None:
    assert {d.name: int(d) for d in DataType} == DTYPE_NUMBERS


def test_datatype_value_5_is_reserved() -> None:
    with pytest.raises(ValueError):
        DataType(5)
    with pytest.raises(InvalidArgumentError, match="unknown DataType value 5"):
        DataType.parse(5)


@pytest.mark.parametrize("name", sorted(TYPE_SIZES))
def test_type_size_matches_ge(name: str) -> None:
    assert DataType[name].type_size == TYPE_SIZES[name]


def test_sub_byte_sizes_use_the_bit_offset() -> None:
    assert DATA_TYPE_SIZE_BIT_OFFSET == 1000
    assert D.DT_INT4.itemsize == 0.5
    assert D.DT_UINT1.itemsize == 0.125
    assert D.DT_FLOAT6_E3M2.itemsize == 0.75
    assert D.DT_BF16.itemsize == 2.0
    assert D.DT_COMPLEX128.itemsize == 16.0


@pytest.mark.parametrize("dtype,count,expected", [
    (D.DT_FLOAT, 6, 24), (D.DT_FLOAT16, 3, 6), (D.DT_BF16, 5, 10), (D.DT_INT64, 2, 16),
    (D.DT_COMPLEX64, 3, 24), (D.DT_COMPLEX32, 3, 12), (D.DT_FLOAT8_E4M3FN, 7, 7), (D.DT_DUAL, 2, 10),
    (D.DT_INT4, 3, 2),  # 12 bits -> 2 bytes (rounded up)
    (D.DT_INT4, 4, 2), (D.DT_FLOAT4_E2M1, 1, 1), (D.DT_FLOAT4_E1M2, 5, 3),
    (D.DT_UINT1, 9, 2), (D.DT_UINT1, 8, 1), (D.DT_INT2, 3, 1), (D.DT_UINT2, 5, 2),
    (D.DT_FLOAT6_E3M2, 4, 3), (D.DT_FLOAT6_E2M3, 5, 4),  # 30 bits -> 4 bytes
    (D.DT_INT4, 0, 0), (D.DT_FLOAT, 0, 0),
    (D.DT_STRING, 10, 0), (D.DT_UNDEFINED, 4, 0),  # size -1: nothing to allocate
])
def test_nbytes_rounds_sub_byte_types_up(dtype: DataType, count: int, expected: int) -> None:
    assert dtype.nbytes(count) == expected


@given(st.sampled_from(list(DataType)), st.integers(0, 10_000))
@settings(max_examples=200, deadline=None)
def test_nbytes_is_ceil_of_bits(dtype: DataType, count: int) -> None:
    size = dtype.type_size
    if size < 0:
        assert dtype.nbytes(count) == 0
    elif size >= DATA_TYPE_SIZE_BIT_OFFSET:
        bits = (size - DATA_TYPE_SIZE_BIT_OFFSET) * count
        assert dtype.nbytes(count) == -(-bits // 8)
    else:
        assert dtype.nbytes(count) == size * count


@pytest.mark.parametrize("name", sorted(NUMPY_STORAGE))
def test_numpy_storage_dtype(name: str) -> None:
    assert DataType[name].numpy_dtype == np.dtype(NUMPY_STORAGE[name])


def test_byte_sized_numpy_storage_matches_type_size() -> None:
    # Every type whose storage is a numeric numpy type of whole bytes stores exactly type_size bytes.
    for d in DataType:
        size = d.type_size
        if 0 < size < DATA_TYPE_SIZE_BIT_OFFSET and d.numpy_dtype != np.dtype(object) and d != D.DT_DUAL:
            assert d.numpy_dtype.itemsize == size, d


def test_short_name() -> None:
    assert D.DT_FLOAT.short_name == "float"
    assert D.DT_BF16.short_name == "bf16"
    assert D.DT_INT64.short_name == "int64"
    assert D.DT_FLOAT8_E4M3FN.short_name == "float8_e4m3fn"


@pytest.mark.parametrize("text,expected", [
    ("DT_FLOAT", D.DT_FLOAT), ("float", D.DT_FLOAT), ("float32", D.DT_FLOAT), ("fp32", D.DT_FLOAT),
    ("fp16", D.DT_FLOAT16), ("half", D.DT_FLOAT16), ("float16", D.DT_FLOAT16), ("bf16", D.DT_BF16),
    ("bfloat16", D.DT_BF16), ("float64", D.DT_DOUBLE), ("double", D.DT_DOUBLE), ("int64", D.DT_INT64),
    ("  Int32 ", D.DT_INT32), ("bool", D.DT_BOOL), ("complex", D.DT_COMPLEX64),
    ("complex128", D.DT_COMPLEX128), ("hifloat8", D.DT_HIFLOAT8), ("dt_float4_e2m1", D.DT_FLOAT4_E2M1),
    (27, D.DT_BF16), (np.int64(9), D.DT_INT64), (D.DT_UINT8, D.DT_UINT8),
])
def test_datatype_parse_accepts_names_aliases_and_numbers(text, expected: DataType) -> None:
    assert DataType.parse(text) is expected


def test_datatype_parse_accepts_numpy_dtype_names() -> None:
    for np_type, expected in ((np.float32, D.DT_FLOAT), (np.float16, D.DT_FLOAT16), (np.int8, D.DT_INT8),
                              (np.uint64, D.DT_UINT64), (np.bool_, D.DT_BOOL), (np.complex64, D.DT_COMPLEX64)):
        assert DataType.parse(np.dtype(np_type)) is expected


def test_datatype_parse_rejects_unknown_name_and_lists_accepted_ones() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        DataType.parse("float33")
    msg = str(info.value)
    assert "'float33'" in msg and "accepted names" in msg
    for accepted in ("float32", "bf16", "fp16", "int64", "dt_float"):
        assert accepted in msg


def test_datatype_parse_rejects_bool_and_out_of_range_numbers() -> None:
    with pytest.raises(InvalidArgumentError):
        DataType.parse(True)  # a bool is not a dtype number
    with pytest.raises(InvalidArgumentError, match="accepted values"):
        DataType.parse(43)
    with pytest.raises(InvalidArgumentError):
        DataType.parse(-1)


def test_floating_check_types() -> None:
    assert FLOATING_CHECK_TYPES == {D.DT_FLOAT, D.DT_FLOAT16, D.DT_BF16}


# ---- Format -----------------------------------------------------------------------------------------

def test_format_numbering_matches_ge_exactly() -> None:
    assert {f.name[len("FORMAT_"):]: int(f) for f in Format} == FORMAT_NUMBERS


@pytest.mark.parametrize("text,expected", [
    ("ND", Format.FORMAT_ND), ("nd", Format.FORMAT_ND), ("FORMAT_ND", Format.FORMAT_ND),
    ("fractal_nz", Format.FORMAT_FRACTAL_NZ), (" NCDHW ", Format.FORMAT_NCDHW), (3, Format.FORMAT_NC1HWC0),
    (np.int32(4), Format.FORMAT_FRACTAL_Z), (Format.FORMAT_NHWC, Format.FORMAT_NHWC),
    # ge spells this one with a lower-case 'o'; parsing is case-insensitive for it too.
    ("C1HWNCoC0", Format.FORMAT_C1HWNCoC0), ("FORMAT_C1HWNCoC0", Format.FORMAT_C1HWNCoC0),
    ("c1hwncoc0", Format.FORMAT_C1HWNCoC0),
])
def test_format_parse(text, expected: Format) -> None:
    assert Format.parse(text) is expected


def test_format_parse_rejects_unknown_name_and_lists_accepted_ones() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        Format.parse("NZ")
    msg = str(info.value)
    assert "'NZ'" in msg and "accepted names" in msg
    for accepted in ("ND", "NCHW", "FRACTAL_NZ", "NC1HWC0", "C1HWNCoC0"):
        assert accepted in msg


def test_format_parse_rejects_out_of_range_number() -> None:
    with pytest.raises(InvalidArgumentError, match="accepted values: 0..47"):
        Format.parse(48)


# ---- bf16 / fp16 helpers ----------------------------------------------------------------------------

def _f32(bits: int) -> np.ndarray:
    return np.array([bits], dtype=np.uint32).view(np.float32)


@pytest.mark.parametrize("f32_bits,bf16_bits", [
    (0x3F800000, 0x3F80),  # 1.0 exact
    (0x3F808000, 0x3F80),  # halfway, lower neighbour even -> down
    (0x3F818000, 0x3F82),  # halfway, lower neighbour odd -> up to even
    (0x3F808001, 0x3F81),  # just above halfway -> up
    (0x3F807FFF, 0x3F80),  # just below halfway -> down
    (0xBF818000, 0xBF82),  # negative ties behave the same on the magnitude
    (0x80000000, 0x8000),  # -0.0 keeps its sign
    (0x7F800000, 0x7F80),  # +inf
    (0xFF800000, 0xFF80),  # -inf
    (0x7F7FFFFF, 0x7F80),  # max float rounds up to +inf
    (0x00000001, 0x0000),  # smallest subnormal rounds to zero
])
def test_float32_to_bf16_rounds_to_nearest_even(f32_bits: int, bf16_bits: int) -> None:
    assert int(float32_to_bf16(_f32(f32_bits))[0]) == bf16_bits


def test_float32_to_bf16_preserves_nan() -> None:
    nans = np.array([0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0xFFC00001], dtype=np.uint32).view(np.float32)
    out = float32_to_bf16(nans)
    assert out.dtype == np.uint16
    assert np.isnan(bf16_to_float32(out)).all()


def test_bf16_widening_is_exact_for_every_pattern() -> None:
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    wide = bf16_to_float32(every)
    assert wide.dtype == np.float32
    assert np.array_equal(wide.view(np.uint32), every.astype(np.uint32) << 16)
    back = float32_to_bf16(wide)
    finite = ~np.isnan(wide)
    assert np.array_equal(back[finite], every[finite])
    assert np.isnan(bf16_to_float32(back[~finite])).all()


@given(st.integers(0, (1 << 32) - 1))
@settings(max_examples=300, deadline=None)
def test_float32_to_bf16_picks_the_nearest_neighbour_ties_to_even(bits: int) -> None:
    x = _f32(bits)
    if np.isnan(x[0]):
        return
    got = int(float32_to_bf16(x)[0])
    lower = bits >> 16  # truncation toward zero in magnitude
    upper = lower + 1
    assert got in (lower, upper)
    dist = [abs(float(x[0]) - float(bf16_to_float32(np.array([c], np.uint16))[0])) for c in (lower, upper)]
    if dist[0] != dist[1]:
        assert got == (lower, upper)[int(dist[1] < dist[0])]
    else:
        assert got % 2 == 0


def test_bf16_helpers_keep_shape_including_0d() -> None:
    assert float32_to_bf16(np.float32(1.0)).shape == ()
    assert bf16_to_float32(np.uint16(0x3F80)).shape == ()
    grid = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert float32_to_bf16(grid).shape == (2, 3)
    assert float32_to_bf16(grid.T).shape == (3, 2)
    assert np.array_equal(bf16_to_float32(float32_to_bf16(grid.T)), grid.T)


def test_fp16_rounding_and_widening() -> None:
    half_ulp = 2.0 ** -11
    vals = np.array([1 + half_ulp, 1 + 3 * half_ulp, 65520.0, np.nan, -0.0], dtype=np.float32)
    out = float32_to_fp16(vals)
    assert out.dtype == np.float16
    assert out[0] == 1.0  # tie -> even
    assert out[1] == 1 + 4 * half_ulp  # tie -> even (up)
    assert np.isinf(out[2])  # above max half
    assert np.isnan(out[3])
    assert np.signbit(out[4])
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    wide = fp16_to_float32(every)
    assert wide.dtype == np.float32
    finite = ~np.isnan(every)
    assert np.array_equal(float32_to_fp16(wide)[finite].view(np.uint16), every[finite].view(np.uint16))
    assert np.isnan(wide[~finite]).all()


def test_to_and_from_compute() -> None:
    bits = np.array([0x3F80, 0xC000], dtype=np.uint16)
    assert np.array_equal(to_compute(bits, D.DT_BF16), np.array([1.0, -2.0], dtype=np.float32))
    assert np.array_equal(from_compute(np.array([1.0, -2.0], np.float32), D.DT_BF16), bits)
    assert from_compute(np.array([1.0, 2.0]), D.DT_FLOAT).dtype == np.float32
    assert from_compute(np.array([1.7, -2.2]), D.DT_INT32).tolist() == [1, -2]
    ints = np.array([1, 2], dtype=np.int64)
    assert to_compute(ints, D.DT_INT64) is ints  # no copy for native types
