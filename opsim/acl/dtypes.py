"""DataType and Format with CANN/GE numbering, element sizes and numpy storage dtypes.

Types numpy lacks (bfloat16, the 8/6/4-bit floats, sub-byte integers, complex32) are stored as raw
unsigned integers of the right width; `bf16_to_float32` / `float32_to_bf16` convert bfloat16.
"""
from __future__ import annotations

from enum import IntEnum

import numpy as np

from opsim.errors import InvalidArgumentError

#: A type size >= this offset means "size in bits = value - offset" (ge's kDataTypeSizeBitOffset).
DATA_TYPE_SIZE_BIT_OFFSET = 1000


class DataType(IntEnum):
    """ge::DataType / op::DataType (graph/types.h). 5 is reserved."""

    DT_FLOAT = 0
    DT_FLOAT16 = 1
    DT_INT8 = 2
    DT_INT32 = 3
    DT_UINT8 = 4
    DT_INT16 = 6
    DT_UINT16 = 7
    DT_UINT32 = 8
    DT_INT64 = 9
    DT_UINT64 = 10
    DT_DOUBLE = 11
    DT_BOOL = 12
    DT_STRING = 13
    DT_DUAL_SUB_INT8 = 14
    DT_DUAL_SUB_UINT8 = 15
    DT_COMPLEX64 = 16
    DT_COMPLEX128 = 17
    DT_QINT8 = 18
    DT_QINT16 = 19
    DT_QINT32 = 20
    DT_QUINT8 = 21
    DT_QUINT16 = 22
    DT_RESOURCE = 23
    DT_STRING_REF = 24
    DT_DUAL = 25
    DT_VARIANT = 26
    DT_BF16 = 27
    DT_UNDEFINED = 28
    DT_INT4 = 29
    DT_UINT1 = 30
    DT_INT2 = 31
    DT_UINT2 = 32
    DT_COMPLEX32 = 33
    DT_HIFLOAT8 = 34
    DT_FLOAT8_E5M2 = 35
    DT_FLOAT8_E4M3FN = 36
    DT_FLOAT8_E8M0 = 37
    DT_FLOAT6_E3M2 = 38
    DT_FLOAT6_E2M3 = 39
    DT_FLOAT4_E2M1 = 40
    DT_FLOAT4_E1M2 = 41
    DT_MAX = 42

    @property
    def type_size(self) -> int:
        """ge's TypeSize: bytes, or 1000 + bits for sub-byte types, -1 where undefined."""
        return _TYPE_SIZE[self]

    @property
    def itemsize(self) -> float:
        """Bytes per element as a number (0.5 for 4-bit types)."""
        s = _TYPE_SIZE[self]
        if s >= DATA_TYPE_SIZE_BIT_OFFSET:
            return (s - DATA_TYPE_SIZE_BIT_OFFSET) / 8
        return float(s)

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype opsim stores elements in (raw unsigned ints where numpy lacks the type)."""
        return _NUMPY[self]

    @property
    def short_name(self) -> str:
        """The name without the DT_ prefix, lower case: 'float', 'bf16', 'int64'."""
        return self.name[3:].lower()

    def nbytes(self, count: int) -> int:
        """Bytes for `count` elements; sub-byte types round up to whole bytes (ceil(bits*count/8))."""
        s = _TYPE_SIZE[self]
        if s >= DATA_TYPE_SIZE_BIT_OFFSET:
            return (s - DATA_TYPE_SIZE_BIT_OFFSET) * count // 8 + (1 if (s - DATA_TYPE_SIZE_BIT_OFFSET) * count % 8 else 0)
        if s < 0:
            return 0
        return s * count

    @classmethod
    def parse(cls, name: "str | int | DataType") -> "DataType":
        """Accept 'DT_FLOAT', 'float', 'float32', 'fp16', 'bfloat16', a numpy dtype name or the number."""
        if isinstance(name, DataType):
            return name
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            try:
                return cls(int(name))
            except ValueError:
                raise InvalidArgumentError(
                    f"unknown DataType value {name}; accepted values: {sorted(int(d) for d in cls)}"
                ) from None
        key = str(name).strip().lower()
        if key in _ALIASES:
            return _ALIASES[key]
        raise InvalidArgumentError(
            f"unknown dtype {name!r}; accepted names: {', '.join(sorted(_ALIASES))}"
        )


_TYPE_SIZE = {
    DataType.DT_FLOAT: 4, DataType.DT_FLOAT16: 2, DataType.DT_INT8: 1, DataType.DT_INT32: 4,
    DataType.DT_UINT8: 1, DataType.DT_INT16: 2, DataType.DT_UINT16: 2, DataType.DT_UINT32: 4,
    DataType.DT_INT64: 8, DataType.DT_UINT64: 8, DataType.DT_DOUBLE: 8, DataType.DT_BOOL: 1,
    DataType.DT_STRING: -1, DataType.DT_DUAL_SUB_INT8: 1, DataType.DT_DUAL_SUB_UINT8: 1,
    DataType.DT_COMPLEX64: 8, DataType.DT_COMPLEX128: 16, DataType.DT_QINT8: 1, DataType.DT_QINT16: 2,
    DataType.DT_QINT32: 4, DataType.DT_QUINT8: 1, DataType.DT_QUINT16: 2, DataType.DT_RESOURCE: 8,
    DataType.DT_STRING_REF: -1, DataType.DT_DUAL: 5, DataType.DT_VARIANT: 8, DataType.DT_BF16: 2,
    DataType.DT_UNDEFINED: -1, DataType.DT_INT4: 1004, DataType.DT_UINT1: 1001, DataType.DT_INT2: 1002,
    DataType.DT_UINT2: 1002, DataType.DT_COMPLEX32: 4, DataType.DT_HIFLOAT8: 1, DataType.DT_FLOAT8_E5M2: 1,
    DataType.DT_FLOAT8_E4M3FN: 1, DataType.DT_FLOAT8_E8M0: 1, DataType.DT_FLOAT6_E3M2: 1006,
    DataType.DT_FLOAT6_E2M3: 1006, DataType.DT_FLOAT4_E2M1: 1004, DataType.DT_FLOAT4_E1M2: 1004,
    DataType.DT_MAX: -1,
}

_U8, _U16, _U32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
_NUMPY = {
    DataType.DT_FLOAT: np.dtype(np.float32), DataType.DT_FLOAT16: np.dtype(np.float16),
    DataType.DT_INT8: np.dtype(np.int8), DataType.DT_INT32: np.dtype(np.int32),
    DataType.DT_UINT8: _U8, DataType.DT_INT16: np.dtype(np.int16), DataType.DT_UINT16: _U16,
    DataType.DT_UINT32: _U32, DataType.DT_INT64: np.dtype(np.int64), DataType.DT_UINT64: np.dtype(np.uint64),
    DataType.DT_DOUBLE: np.dtype(np.float64), DataType.DT_BOOL: np.dtype(np.bool_),
    DataType.DT_STRING: np.dtype(object), DataType.DT_DUAL_SUB_INT8: np.dtype(np.int8),
    DataType.DT_DUAL_SUB_UINT8: _U8, DataType.DT_COMPLEX64: np.dtype(np.complex64),
    DataType.DT_COMPLEX128: np.dtype(np.complex128), DataType.DT_QINT8: np.dtype(np.int8),
    DataType.DT_QINT16: np.dtype(np.int16), DataType.DT_QINT32: np.dtype(np.int32), DataType.DT_QUINT8: _U8,
    DataType.DT_QUINT16: _U16, DataType.DT_RESOURCE: np.dtype(np.uint64), DataType.DT_STRING_REF: np.dtype(object),
    DataType.DT_DUAL: _U8, DataType.DT_VARIANT: np.dtype(np.uint64), DataType.DT_BF16: _U16,
    DataType.DT_UNDEFINED: _U8, DataType.DT_INT4: _U8, DataType.DT_UINT1: _U8, DataType.DT_INT2: _U8,
    DataType.DT_UINT2: _U8, DataType.DT_COMPLEX32: _U32, DataType.DT_HIFLOAT8: _U8,
    DataType.DT_FLOAT8_E5M2: _U8, DataType.DT_FLOAT8_E4M3FN: _U8, DataType.DT_FLOAT8_E8M0: _U8,
    DataType.DT_FLOAT6_E3M2: _U8, DataType.DT_FLOAT6_E2M3: _U8, DataType.DT_FLOAT4_E2M1: _U8,
    DataType.DT_FLOAT4_E1M2: _U8, DataType.DT_MAX: _U8,
}

_ALIASES: dict[str, DataType] = {}
for _d in DataType:
    _ALIASES[_d.name.lower()] = _d
    _ALIASES[_d.name[3:].lower()] = _d
_ALIASES.update({
    "float32": DataType.DT_FLOAT, "fp32": DataType.DT_FLOAT, "fp16": DataType.DT_FLOAT16,
    "half": DataType.DT_FLOAT16, "bfloat16": DataType.DT_BF16, "float64": DataType.DT_DOUBLE,
    "fp64": DataType.DT_DOUBLE, "complex": DataType.DT_COMPLEX64,
})

#: Data types the overflow (non-finite) check inspects: DT_FLOAT, DT_FLOAT16, DT_BF16.
FLOATING_CHECK_TYPES = frozenset({DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16})


class Format(IntEnum):
    """ge::Format (graph/types.h)."""

    FORMAT_NCHW = 0
    FORMAT_NHWC = 1
    FORMAT_ND = 2
    FORMAT_NC1HWC0 = 3
    FORMAT_FRACTAL_Z = 4
    FORMAT_NC1C0HWPAD = 5
    FORMAT_NHWC1C0 = 6
    FORMAT_FSR_NCHW = 7
    FORMAT_FRACTAL_DECONV = 8
    FORMAT_C1HWNC0 = 9
    FORMAT_FRACTAL_DECONV_TRANSPOSE = 10
    FORMAT_FRACTAL_DECONV_SP_STRIDE_TRANS = 11
    FORMAT_NC1HWC0_C04 = 12
    FORMAT_FRACTAL_Z_C04 = 13
    FORMAT_CHWN = 14
    FORMAT_FRACTAL_DECONV_SP_STRIDE8_TRANS = 15
    FORMAT_HWCN = 16
    FORMAT_NC1KHKWHWC0 = 17
    FORMAT_BN_WEIGHT = 18
    FORMAT_FILTER_HWCK = 19
    FORMAT_HASHTABLE_LOOKUP_LOOKUPS = 20
    FORMAT_HASHTABLE_LOOKUP_KEYS = 21
    FORMAT_HASHTABLE_LOOKUP_VALUE = 22
    FORMAT_HASHTABLE_LOOKUP_OUTPUT = 23
    FORMAT_HASHTABLE_LOOKUP_HITS = 24
    FORMAT_C1HWNCoC0 = 25
    FORMAT_MD = 26
    FORMAT_NDHWC = 27
    FORMAT_FRACTAL_ZZ = 28
    FORMAT_FRACTAL_NZ = 29
    FORMAT_NCDHW = 30
    FORMAT_DHWCN = 31
    FORMAT_NDC1HWC0 = 32
    FORMAT_FRACTAL_Z_3D = 33
    FORMAT_CN = 34
    FORMAT_NC = 35
    FORMAT_DHWNC = 36
    FORMAT_FRACTAL_Z_3D_TRANSPOSE = 37
    FORMAT_FRACTAL_ZN_LSTM = 38
    FORMAT_FRACTAL_Z_G = 39
    FORMAT_RESERVED = 40
    FORMAT_ALL = 41
    FORMAT_NULL = 42
    FORMAT_ND_RNN_BIAS = 43
    FORMAT_FRACTAL_ZN_RNN = 44
    FORMAT_NYUV = 45
    FORMAT_NYUV_A = 46
    FORMAT_NCL = 47

    @classmethod
    def parse(cls, name: "str | int | Format") -> "Format":
        """Accept 'ND', 'FORMAT_ND', 'fractal_nz' or the number."""
        if isinstance(name, Format):
            return name
        if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
            try:
                return cls(int(name))
            except ValueError:
                raise InvalidArgumentError(
                    f"unknown Format value {name}; accepted values: 0..{max(int(f) for f in cls)}"
                ) from None
        key = str(name).strip().upper()
        if not key.startswith("FORMAT_"):
            key = "FORMAT_" + key
        found = _FORMAT_BY_UPPER_NAME.get(key)  # case-insensitive: ge spells one name FORMAT_C1HWNCoC0
        if found is None:
            names = ", ".join(f.name[7:] for f in cls)
            raise InvalidArgumentError(f"unknown format {name!r}; accepted names: {names}")
        return found


_FORMAT_BY_UPPER_NAME = {f.name.upper(): f for f in Format}


# ---- bfloat16 / float16 helpers -----------------------------------------------------------------

def float32_to_bf16(values: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 bit patterns (round to nearest even), returned as uint16."""
    shape = np.shape(values)  # ascontiguousarray turns a 0-d input into shape (1,); restore it
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    rounding = ((bits >> 16) & 1) + np.uint32(0x7FFF)
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = np.uint16(0x7FC0)
    return out.reshape(shape)


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """Widen bfloat16 bit patterns (uint16) to float32 exactly."""
    shape = np.shape(bits)
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32).reshape(shape)


def float32_to_fp16(values: np.ndarray) -> np.ndarray:
    """Round float32 to float16 (IEEE half, numpy's rounding); overflow gives inf silently, as a device cast."""
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float32).astype(np.float16)


def fp16_to_float32(values: np.ndarray) -> np.ndarray:
    """Widen float16 to float32 exactly."""
    return np.asarray(values, dtype=np.float16).astype(np.float32)


def to_compute(values: np.ndarray, dtype: DataType) -> np.ndarray:
    """Storage array -> the numpy array a kernel computes on (bf16 becomes float32)."""
    if dtype == DataType.DT_BF16:
        return bf16_to_float32(values)
    return values


def from_compute(values: np.ndarray, dtype: DataType) -> np.ndarray:
    """Computed array -> storage array of `dtype` (bf16 rounds to nearest even)."""
    if dtype == DataType.DT_BF16:
        return float32_to_bf16(values)
    return np.asarray(values).astype(dtype.numpy_dtype, copy=False)
