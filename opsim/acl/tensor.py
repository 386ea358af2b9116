"""aclTensor and friends: a view (shape, strides, offset, format) over a storage (address, placement).

The storage is shared between views, exactly as opbase's aclStorage is: the workspace offset the planner
writes, the device address bound in phase 2 and the graph's producer slot ("extend") all live on it.
Data are read through the device memory (`opsim.device.memory`) so that tensors at overlapping addresses
really share bytes; host tensors carry their own numpy buffer.
"""
from __future__ import annotations

import itertools
from enum import IntEnum
from typing import Iterable, Sequence

import numpy as np

from opsim.acl.dtypes import DataType, Format, float32_to_bf16, bf16_to_float32
from opsim.errors import InvalidArgumentError

#: Maximum number of dimensions opbase tensors support (op::MAX_DIM_NUM).
MAX_DIM_NUM = 8

_pointer_counter = itertools.count(0x7F0000001000, 0x40)


def host_pointer() -> int:
    """A deterministic fake host address for an object keyed by identity (tensor lists in AI CPU keys)."""
    return next(_pointer_counter)


def reset_host_pointers(start: int = 0x7F0000001000) -> None:
    """Restart fake host addresses, so that a fresh simulation gives byte-identical keys."""
    global _pointer_counter
    _pointer_counter = itertools.count(start, 0x40)


_set_field = object.__setattr__
ASSIGNMENTS = [0]
"""Field assignments made so far to all tensors and scalars: while it stands still, no field of any of them
changed (a memo that saw it last reads nothing else)."""


def _stamped_setattr(self: object, name: str, value: object) -> None:
    """A field assignment, counted in ASSIGNMENTS, that also gives the object that count as its `version` (a
    number no object had before)."""
    _set_field(self, name, value)
    ASSIGNMENTS[0] = n = ASSIGNMENTS[0] + 1
    _set_field(self, "version", n)


class Placement(IntEnum):
    """op::TensorPlacement."""

    ON_DEVICE_HBM = 0
    ON_HOST = 1
    FOLLOWING = 2


class Shape(tuple):
    """An immutable list of dimensions (op::Shape / gert::Shape)."""

    def __new__(cls, dims: Iterable[int] = ()):
        dims = tuple(int(d) for d in dims)
        return super().__new__(cls, dims)

    @property
    def dim_num(self) -> int:
        return len(self)

    def numel(self) -> int:
        """Element count (1 for a scalar shape, 0 when any dimension is 0)."""
        n = 1
        for d in self:
            n *= d
        return n

    def contiguous_strides(self) -> tuple[int, ...]:
        strides = [1] * len(self)
        acc = 1
        for i in range(len(self) - 1, -1, -1):
            strides[i] = acc
            acc *= max(self[i], 1)
        return tuple(strides)

    def __repr__(self) -> str:
        return f"Shape({list(self)})"


def broadcast_shapes(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """numpy/torch broadcasting of two shapes; None when they cannot broadcast."""
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != y and x != 1 and y != 1:
            return None
        out.append(max(x, y) if x != 0 and y != 0 else 0)
    return tuple(reversed(out))


def validate_dims(dims: Sequence[int], what: str = "shape") -> Shape:
    """Reject negative dimensions and more than 8 dims with a message naming the offending value."""
    shape = Shape(dims)
    if len(shape) > MAX_DIM_NUM:
        raise InvalidArgumentError(f"{what} {list(shape)} has {len(shape)} dims; at most {MAX_DIM_NUM} are allowed")
    for i, d in enumerate(shape):
        if d < 0:
            raise InvalidArgumentError(f"{what} {list(shape)} has a negative dimension at index {i}; use sizes >= 0")
    return shape


class Storage:
    """aclStorage: what views share. `workspace_offset` is written by the planner (UINT64_MAX = placed)."""

    __slots__ = ("address", "offset", "placement", "from_workspace", "workspace_offset", "host_data",
                 "extend", "memory")

    def __init__(self, *, address: int = 0, placement: Placement = Placement.ON_DEVICE_HBM,
                 from_workspace: bool = False, host_data: np.ndarray | None = None, memory=None):
        self.address = address
        self.offset = 0
        self.placement = placement
        self.from_workspace = from_workspace
        self.workspace_offset = 0
        self.host_data = host_data
        self.extend = None  # graph producer slot (KernelTensor), see opsim.opdev.graph
        self.memory = memory  # device memory used to read/write data (None: numerics off)


class Tensor:
    """aclTensor: view shape/strides/offset/format, storage shape/format, origin shape/format, dtype."""

    __slots__ = ("dtype", "view_shape", "strides", "view_offset", "view_format", "storage_shape",
                 "storage_format", "origin_shape", "origin_format", "storage", "name", "version", "__weakref__")

    __setattr__ = _stamped_setattr
    """Every assignment to a field stamps `version` anew (like torch's tensor version counter): while a
    tensor's version is the one a memo saw, none of its fields has been assigned since, which the fast path's
    argument checks compare instead of every field. The storage's own fields are not covered."""

    def __init__(self, shape: Sequence[int], dtype: DataType | str = DataType.DT_FLOAT,
                 fmt: Format | str = Format.FORMAT_ND, *, strides: Sequence[int] | None = None,
                 view_offset: int = 0, storage_shape: Sequence[int] | None = None,
                 storage_format: Format | str | None = None, origin_shape: Sequence[int] | None = None,
                 origin_format: Format | str | None = None, placement: Placement = Placement.ON_DEVICE_HBM,
                 address: int = 0, storage: Storage | None = None, from_workspace: bool = False,
                 name: str | None = None):
        self.dtype = DataType.parse(dtype)
        self.view_shape = validate_dims(shape, "view shape")
        self.strides = tuple(int(s) for s in strides) if strides is not None else self.view_shape.contiguous_strides()
        if len(self.strides) != len(self.view_shape):
            raise InvalidArgumentError(
                f"strides {list(self.strides)} must have one entry per dimension of shape {list(self.view_shape)}")
        self.view_offset = int(view_offset)
        self.view_format = Format.parse(fmt)
        self.storage_shape = validate_dims(storage_shape, "storage shape") if storage_shape is not None else self.view_shape
        self.storage_format = Format.parse(storage_format) if storage_format is not None else self.view_format
        self.origin_shape = validate_dims(origin_shape, "origin shape") if origin_shape is not None else self.view_shape
        self.origin_format = Format.parse(origin_format) if origin_format is not None else self.view_format
        self.storage = storage if storage is not None else Storage(
            address=address, placement=placement, from_workspace=from_workspace)
        self.name = name

    # --- opbase accessors ------------------------------------------------------------------------
    @property
    def placement(self) -> Placement:
        return self.storage.placement

    @property
    def is_from_workspace(self) -> bool:
        return self.storage.from_workspace

    @property
    def storage_address(self) -> int:
        """GetStorageAddr: the storage base (for workspace tensors, the workspace base)."""
        return self.storage.address

    @property
    def data_address(self) -> int:
        """GetData: the address a kernel sees."""
        st = self.storage
        esize = self.dtype.itemsize
        if st.from_workspace:
            return st.address + st.workspace_offset + int(self.view_offset * esize)
        return st.address + int((self.view_offset + st.offset) * esize)

    def numel(self) -> int:
        return self.view_shape.numel()

    def storage_numel(self) -> int:
        return self.storage_shape.numel()

    @property
    def storage_nbytes(self) -> int:
        """Storage element count x dtype size (the byte size opbase plans, dumps and copies)."""
        return self.dtype.nbytes(self.storage_numel())

    @property
    def nbytes(self) -> int:
        return self.dtype.nbytes(self.numel())

    def is_empty(self) -> bool:
        return any(d == 0 for d in self.view_shape)

    def is_contiguous(self) -> bool:
        return self.strides == self.view_shape.contiguous_strides()

    def set_storage_address(self, address: int) -> None:
        """aclSetTensorAddr & co.: point the storage at a new address (used between repeated runs)."""
        self.storage.address = int(address)

    def set_shape(self, dims: Sequence[int]) -> None:
        """Overwrite view, storage and origin shapes, strides reset to contiguous (output-shape refresh)."""
        shape = validate_dims(dims)
        self.view_shape = shape
        self.storage_shape = shape
        self.origin_shape = shape
        self.strides = shape.contiguous_strides()

    # --- numerics ---------------------------------------------------------------------------------
    def _raw_bytes(self) -> np.ndarray | None:
        st = self.storage
        if st.placement == Placement.ON_HOST:
            return st.host_data
        if st.memory is None:
            return None
        nbytes = self.dtype.nbytes(self.storage_numel() + self.view_offset)
        base = self.data_address - int(self.view_offset * self.dtype.itemsize)
        return st.memory.view(base, nbytes)

    def has_data(self) -> bool:
        return self._raw_bytes() is not None

    def numpy(self) -> np.ndarray:
        """A numpy view of the tensor's elements (bf16 as uint16 bits); raises if no data is attached."""
        raw = self._raw_bytes()
        if raw is None:
            raise InvalidArgumentError(f"tensor {self.name or ''} has no data (numerics are off or it is unbound)")
        np_dtype = self.dtype.numpy_dtype
        flat = raw.view(np_dtype) if raw.dtype != np_dtype else raw
        itemsize = np_dtype.itemsize
        if self.is_contiguous():
            n = self.numel()
            return flat[self.view_offset:self.view_offset + n].reshape(self.view_shape)
        return np.lib.stride_tricks.as_strided(
            flat[self.view_offset:], shape=self.view_shape, strides=tuple(s * itemsize for s in self.strides))

    def write(self, values: np.ndarray) -> None:
        """Copy `values` (storage dtype) into the tensor's elements."""
        view = self.numpy()
        view[...] = np.asarray(values).reshape(view.shape).astype(view.dtype, copy=False)

    def __repr__(self) -> str:
        return (f"Tensor({self.name + ', ' if self.name else ''}{list(self.view_shape)}, {self.dtype.name}, "
                f"{self.view_format.name[7:]}, {'host' if self.placement == Placement.ON_HOST else 'device'})")


def host_tensor(values, dtype: DataType | str | None = None, fmt: Format | str = Format.FORMAT_ND,
                name: str | None = None) -> Tensor:
    """A host tensor holding a copy of `values` (AllocHostTensor / ConvertToTensor)."""
    arr = np.asarray(values)
    dt = DataType.parse(dtype) if dtype is not None else _dtype_of_numpy(arr.dtype)
    if dt == DataType.DT_BF16 and arr.dtype != np.uint16:
        # Values are converted to bf16 (round to nearest even); uint16 input is taken as bf16 bits already.
        stored = float32_to_bf16(arr)
    else:
        stored = arr.astype(dt.numpy_dtype, copy=False)
    data = np.ascontiguousarray(stored).reshape(-1).view(np.uint8).copy()
    t = Tensor(arr.shape, dt, fmt, placement=Placement.ON_HOST, name=name)
    t.storage.host_data = data
    return t


def _dtype_of_numpy(dt: np.dtype) -> DataType:
    for d, n in ((DataType.DT_FLOAT, np.float32), (DataType.DT_FLOAT16, np.float16), (DataType.DT_DOUBLE, np.float64),
                 (DataType.DT_INT64, np.int64), (DataType.DT_INT32, np.int32), (DataType.DT_INT8, np.int8),
                 (DataType.DT_UINT8, np.uint8), (DataType.DT_INT16, np.int16), (DataType.DT_BOOL, np.bool_),
                 (DataType.DT_UINT64, np.uint64), (DataType.DT_UINT32, np.uint32), (DataType.DT_UINT16, np.uint16),
                 (DataType.DT_COMPLEX64, np.complex64), (DataType.DT_COMPLEX128, np.complex128)):
        if np.dtype(n) == dt:
            return d
    raise InvalidArgumentError(f"numpy dtype {dt} has no DataType counterpart")


class TensorList:
    """aclTensorList: an ordered list of tensors (elements may be None). Keyed by identity in AI CPU keys."""

    __slots__ = ("tensors", "pointer")

    def __init__(self, tensors: Iterable[Tensor | None] = ()):
        self.tensors = list(tensors)
        self.pointer = host_pointer()

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self):
        return iter(self.tensors)

    def __getitem__(self, i: int) -> Tensor | None:
        return self.tensors[i]

    def __repr__(self) -> str:
        return f"TensorList({self.tensors!r})"


class Scalar:
    """aclScalar: a value and its dtype, stored as the dtype's raw bytes."""

    __slots__ = ("dtype", "raw", "pointer", "version")

    __setattr__ = _stamped_setattr
    """Every assignment stamps `version` anew (see Tensor)."""

    def __init__(self, value, dtype: DataType | str = DataType.DT_FLOAT):
        self.dtype = DataType.parse(dtype)
        if self.dtype == DataType.DT_BF16:
            arr = float32_to_bf16(np.array([value], dtype=np.float32))
        else:
            arr = np.array([value]).astype(self.dtype.numpy_dtype)
        self.raw = arr.tobytes()
        self.pointer = host_pointer()

    @property
    def value(self):
        if self.dtype == DataType.DT_BF16:
            return float(bf16_to_float32(np.frombuffer(self.raw, np.uint16))[0])
        return np.frombuffer(self.raw, self.dtype.numpy_dtype)[0].item()

    def __repr__(self) -> str:
        return f"Scalar({self.value!r}, {self.dtype.name})"


class _Array:
    """Base of the aclXxxArray host arrays: values copied at creation."""

    __slots__ = ("values", "pointer")
    np_dtype: np.dtype = np.dtype(np.int64)

    def __init__(self, values: Iterable = ()):
        self.values = np.array(list(values), dtype=self.np_dtype)
        self.pointer = host_pointer()

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values.tolist())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.values.tolist()})"


class IntArray(_Array):
    """aclIntArray (int64 elements)."""
    np_dtype = np.dtype(np.int64)


class FloatArray(_Array):
    """aclFloatArray (float32 elements)."""
    np_dtype = np.dtype(np.float32)


class BoolArray(_Array):
    """aclBoolArray (1-byte bool elements)."""
    np_dtype = np.dtype(np.bool_)


class Fp16Array(_Array):
    """aclFp16Array (float16 elements)."""
    np_dtype = np.dtype(np.float16)


class ScalarList:
    """aclScalarList."""

    __slots__ = ("scalars", "pointer")

    def __init__(self, scalars: Iterable[Scalar | None] = ()):
        self.scalars = list(scalars)
        self.pointer = host_pointer()

    def __len__(self) -> int:
        return len(self.scalars)

    def __iter__(self):
        return iter(self.scalars)
