"""OpArgDef / OpArgType / OpArg / OpArgList / OpArgContext, faithful to opbase's op_arg_def.

A context is one flat slot array: slot 0 is reserved for an appended workspace, slots 1..N hold every
element of every group in argument order (groups of kinds 7/8 count but are never written). Each of the 7
stored kinds has a list = (start slot, count); a repeated kind keeps the start of its first group and adds
counts, exactly like the C++ (so only adjacent repeats concatenate cleanly).
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any, Callable, Iterator, NamedTuple

import numpy as np

from opsim.acl.dtypes import DataType, Format
from opsim.acl.tensor import BoolArray, FloatArray, Fp16Array, IntArray, Scalar, ScalarList, Tensor, TensorList
from opsim.errors import InvalidArgumentError, SimulationError, UnsupportedTypeError, UseAfterDestroyError
from opsim.opdev.op_def import OpImplMode


class OpArgDef(IntEnum):
    """The argument kinds. Only 0..6 are stored in a context (OP_ARG_TYPE_NUM = 7)."""

    OP_INPUT_ARG = 0
    OP_OUTPUT_ARG = 1
    OP_ATTR_ARG = 2
    OP_WORKSPACE_ARG = 3
    OP_OUTSHAPE_ARG = 4
    OP_OPTION_ARG = 5
    OP_EXEC_MODE_ARG = 6
    OP_MEMSET_ARG = 7
    OP_EMPTY_ARG = 8
    OP_ARG_DEF_BUTT = 9


OP_ARG_TYPE_NUM = 7

_KIND_NAMES = ("input", "output", "attr", "workspace", "outshape", "option", "mode", "memset", "empty")


def op_arg_type_str(kind: int) -> str:
    """OpArgTypeStr: the kind's name, "unknown" for 9 and above."""
    return _KIND_NAMES[kind] if 0 <= kind < len(_KIND_NAMES) else "unknown"


class OpArgType(IntEnum):
    """Element tags (implicit C++ enum numbering)."""

    OPARG_ACLTENSOR = 0
    OPARG_ACLTENSOR_LIST = 1
    OPARG_ACLSCALAR = 2
    OPARG_STRING = 3
    OPARG_BOOL = 4
    OPARG_INT = 5
    OPARG_UINT = 6
    OPARG_FLOAT = 7
    OPARG_DOUBLE = 8
    OPARG_DATATYPE = 9
    OPARG_INT_LIST = 10
    OPARG_UINT_LIST = 11
    OPARG_FLOAT_LIST = 12
    OPARG_BOOL_LIST = 13
    OPARG_IMPLMODE = 14
    OPARG_MEMSET_WORKSPACE = 15


class Null:
    """A typed null pointer, for the pointer-tagged kinds (None alone means a null aclTensor)."""

    __slots__ = ("tag",)

    def __init__(self, tag: OpArgType):
        self.tag = tag

    def __repr__(self) -> str:
        return f"Null({self.tag.name})"


NULL_TENSOR = None
NULL_TENSOR_LIST = Null(OpArgType.OPARG_ACLTENSOR_LIST)
NULL_SCALAR = Null(OpArgType.OPARG_ACLSCALAR)
NULL_STRING = Null(OpArgType.OPARG_STRING)
NULL_INT_ARRAY = Null(OpArgType.OPARG_INT_LIST)
NULL_FLOAT_ARRAY = Null(OpArgType.OPARG_FLOAT_LIST)
NULL_BOOL_ARRAY = Null(OpArgType.OPARG_BOOL_LIST)


class MemsetWorkspace(list):
    """Internal memset workspace vector: (device address, tensor) pairs (tag OPARG_MEMSET_WORKSPACE)."""


class OpArg(NamedTuple):
    """One element: a tag and its value (pointer-like values are the Python objects, None for null)."""

    type: OpArgType
    value: Any


def to_op_arg(value: Any, group: str = "?", position: int = 0) -> OpArg:
    """The C++ overload resolution of OpArg construction, for Python and opsim values.

    64-bit and every other integer type tag as OPARG_INT; only numpy.uint32 tags as OPARG_UINT; numpy.float32
    is OPARG_FLOAT and a Python float (a C++ double) OPARG_DOUBLE; DataType is OPARG_DATATYPE, OpImplMode is
    OPARG_IMPLMODE and every other enum (Format, OpExecMode, ...) is OPARG_INT.
    """
    tag = _EXACT_TAGS.get(type(value))
    if tag is not None:  # the common exact types, with no conversion (same result as the chain below)
        return OpArg(tag, value)
    T = OpArgType
    if value is None:
        return OpArg(T.OPARG_ACLTENSOR, None)
    if isinstance(value, Tensor):
        return OpArg(T.OPARG_ACLTENSOR, value)
    if isinstance(value, TensorList):
        return OpArg(T.OPARG_ACLTENSOR_LIST, value)
    if isinstance(value, Scalar):
        return OpArg(T.OPARG_ACLSCALAR, value)
    if isinstance(value, Null):
        return OpArg(value.tag, None)
    if isinstance(value, str):
        return OpArg(T.OPARG_STRING, str(value))  # copied at build time
    if isinstance(value, (bool, np.bool_)):
        return OpArg(T.OPARG_BOOL, 1 if value else 0)
    if isinstance(value, DataType):
        return OpArg(T.OPARG_DATATYPE, int(value))
    if isinstance(value, OpImplMode):
        return OpArg(T.OPARG_IMPLMODE, int(value))
    if isinstance(value, np.uint32):
        return OpArg(T.OPARG_UINT, int(value))
    if isinstance(value, (int, np.integer)):  # int32/int64/uint64/..., and every other IntEnum (Format, ...)
        return OpArg(T.OPARG_INT, _checked_int64(int(value), group, position))
    if isinstance(value, np.float32):
        return OpArg(T.OPARG_FLOAT, float(value))
    if isinstance(value, (float, np.float64)):
        return OpArg(T.OPARG_DOUBLE, float(value))
    if isinstance(value, IntArray):
        return OpArg(T.OPARG_INT_LIST, value)
    if isinstance(value, FloatArray):
        return OpArg(T.OPARG_FLOAT_LIST, value)
    if isinstance(value, BoolArray):
        return OpArg(T.OPARG_BOOL_LIST, value)
    if isinstance(value, MemsetWorkspace):
        return OpArg(T.OPARG_MEMSET_WORKSPACE, value)
    hint = ""
    if isinstance(value, (Fp16Array, ScalarList)):
        hint = " (opbase has no OpArg overload for it; convert it to a tensor first)"
    elif isinstance(value, (list, tuple)):
        hint = " (wrap integer lists in IntArray, float lists in FloatArray, tensors in TensorList)"
    raise UnsupportedTypeError(
        f"OP_{group.upper()} element {position} has unsupported type {type(value).__name__}{hint}")


_EXACT_TAGS: dict[type, OpArgType] = {
    type(None): OpArgType.OPARG_ACLTENSOR, Tensor: OpArgType.OPARG_ACLTENSOR,
    TensorList: OpArgType.OPARG_ACLTENSOR_LIST, Scalar: OpArgType.OPARG_ACLSCALAR,
    IntArray: OpArgType.OPARG_INT_LIST, FloatArray: OpArgType.OPARG_FLOAT_LIST, BoolArray: OpArgType.OPARG_BOOL_LIST}
"""Exact types whose OpArg holds the value itself (to_op_arg's first isinstance hits for them)."""
_FLOAT_TAGS: dict[type, OpArgType] = {np.float32: OpArgType.OPARG_FLOAT, float: OpArgType.OPARG_DOUBLE,
                                      np.float64: OpArgType.OPARG_DOUBLE}
"""Exact float types and their tags (the value converted to a Python float, as to_op_arg does)."""


def _as_int64(v: int) -> int:
    """The int64 view of a value (uint64 values above 2^63-1 wrap, same 8 bytes)."""
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= (1 << 63) else v


def _checked_int64(v: int, group: str, position: int) -> int:
    """`_as_int64` for values a C++ int64/uint64 can hold; wider Python ints would silently lose bits."""
    if not -(1 << 63) <= v < (1 << 64):
        raise InvalidArgumentError(
            f"OP_{group.upper()} element {position} = {v} does not fit in 64 bits (int64 or uint64 range)")
    return _as_int64(v)


class OpArgGroup:
    """A group built by a helper macro: a kind and its values."""

    __slots__ = ("kind", "values")

    def __init__(self, kind: OpArgDef, values: tuple):
        self.kind = kind
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        return f"OP_{op_arg_type_str(self.kind).upper()}{self.values!r}"


def op_input(*values) -> OpArgGroup:
    return OpArgGroup(OpArgDef.OP_INPUT_ARG, values)


def op_output(*values) -> OpArgGroup:
    return OpArgGroup(OpArgDef.OP_OUTPUT_ARG, values)


def op_attr(*values) -> OpArgGroup:
    return OpArgGroup(OpArgDef.OP_ATTR_ARG, values)


def op_workspace(*values) -> OpArgGroup:
    return OpArgGroup(OpArgDef.OP_WORKSPACE_ARG, values)


def op_outshape(tensor: Tensor | None, index: int) -> OpArgGroup:
    """OP_OUTSHAPE({tensor, index}): two OpArgs, the shape tensor and the output index (OPARG_INT)."""
    return OpArgGroup(OpArgDef.OP_OUTSHAPE_ARG, (tensor, int(index)))


def op_option(*values) -> OpArgGroup:
    return OpArgGroup(OpArgDef.OP_OPTION_ARG, values)


def op_exec_mode(*values) -> OpArgGroup:
    """OP_MODE(...): only one np.uint32 holding an OpExecMode value is honoured by profiling."""
    return OpArgGroup(OpArgDef.OP_EXEC_MODE_ARG, values)


op_mode = op_exec_mode


def op_memset(*values) -> OpArgGroup:
    """A kind-7 group: counted but never stored (opbase has no OP_MEMSET macro)."""
    return OpArgGroup(OpArgDef.OP_MEMSET_ARG, values)


def op_empty() -> OpArgGroup:
    return OP_EMPTY_ARG


OP_EMPTY_ARG = OpArgGroup(OpArgDef.OP_EMPTY_ARG, ())


class OpArgList:
    """A read view of one kind's list. `args` is the slot run [start, start+count) of the flat array."""

    __slots__ = ("_ctx", "start", "count", "arg_type")

    def __init__(self, ctx: "OpArgContext", start: int | None, count: int, arg_type: OpArgDef | None):
        self._ctx = ctx
        self.start = start
        self.count = count
        self.arg_type = arg_type

    @property
    def has_storage(self) -> bool:
        """`args != nullptr`."""
        return self.start is not None

    @property
    def args(self) -> list[OpArg]:
        if self.start is None:
            return []
        return self._ctx._slots_checked()[self.start:self.start + self.count]

    def __len__(self) -> int:
        return self.count

    def __iter__(self) -> Iterator[OpArg]:
        return iter(self.args)

    def __getitem__(self, i: int) -> OpArg:
        return self.args[i]

    def visit(self, fn: Callable[[OpArg], int]) -> int:
        """Visit all, stopping at the first non-zero return (returned)."""
        for a in self.args:
            r = fn(a)
            if r:
                return r
        return 0

    def visit_at(self, index: int, fn: Callable[[OpArg], Any]) -> Any:
        """opbase's "visit at index": bounds-checked against 0..6, not `count` (quirk). An index >= 7 is
        silently skipped; an index within 0..6 but past `count` would read past the list in C++, which the
        simulator rejects."""
        if index < 0 or index >= OP_ARG_TYPE_NUM:
            return None
        if index >= self.count:
            raise SimulationError(f"visit_at({index}) past a list of {self.count} entries (undefined in opbase)")
        return fn(self.args[index])


class OpArgContext:
    """The argument context handed to a launcher registration. Destroying it twice is harmless and counted."""

    __slots__ = ("_slots", "_lists", "destroy_count", "__weakref__")

    def __init__(self, total: int):
        self._slots: list[OpArg | None] = [None] * (total + 1)
        self._lists: list[list] = [[None, 0, None], [None, 0, None], [None, 0, None], [None, 0, None],
                                   [None, 0, None], [None, 0, None], [None, 0, None]]  # start, count, argType
        self.destroy_count = 0

    @property
    def destroyed(self) -> bool:
        return self.destroy_count > 0

    @property
    def slot_count(self) -> int:
        """OpArg slots the block was sized for: N + 1 (reserved slot 0 plus every group element, kinds 7/8
        included even though they are never written)."""
        return len(self._slots_checked())

    def _slots_checked(self) -> list:
        if self.destroy_count:
            raise UseAfterDestroyError("OpArgContext used after DestroyOpArgContext")
        return self._slots

    def get_op_arg(self, kind: int) -> OpArgList | None:
        """The list of kind 0..6 (never None, maybe empty); None for kinds 7, 8, 9 and beyond."""
        self._slots_checked()
        if not 0 <= kind < OP_ARG_TYPE_NUM:
            return None
        start, count, arg_type = self._lists[kind]
        return OpArgList(self, start, count, arg_type)

    def contains_op_arg_type(self, kind: int) -> bool:
        """True iff kind in 0..6 and its list has storage and a non-zero count."""
        if self.destroy_count:
            raise UseAfterDestroyError("OpArgContext used after DestroyOpArgContext")
        if not 0 <= kind < OP_ARG_TYPE_NUM:
            return False
        start, count, _ = self._lists[kind]
        return start is not None and count != 0

    def append_op_workspace_arg(self, tensor_list: TensorList | None) -> None:
        """Write slot 0 with the tensor list (may be None) unless a workspace is already present."""
        if self.contains_op_arg_type(OpArgDef.OP_WORKSPACE_ARG):
            return
        self._slots[0] = OpArg(OpArgType.OPARG_ACLTENSOR_LIST, tensor_list)
        lst = self._lists[OpArgDef.OP_WORKSPACE_ARG]
        lst[0] = 0
        lst[1] = 1

    # Convenience accessors used throughout opdev: `get_op_arg(kind).args` without the list view.
    def kind_args(self, kind: int) -> list[OpArg]:
        """The elements of kind 0..6 (a new list; empty when the kind has no storage)."""
        if self.destroy_count:
            raise UseAfterDestroyError("OpArgContext used after DestroyOpArgContext")
        start, count, _ = self._lists[kind]
        if start is None:
            return []
        return self._slots[start:start + count]

    def inputs(self) -> list[OpArg]:
        return self.kind_args(0)

    def outputs(self) -> list[OpArg]:
        return self.kind_args(1)

    def attrs(self) -> list[OpArg]:
        return self.kind_args(2)

    def workspaces(self) -> list[OpArg]:
        return self.kind_args(3)

    def outshapes(self) -> list[OpArg]:
        return self.kind_args(4)

    def __repr__(self) -> str:
        if self.destroy_count:
            return "OpArgContext(<destroyed>)"
        parts = []
        for k in range(OP_ARG_TYPE_NUM):
            start, count, _ = self._lists[k]
            if start is not None:
                parts.append(f"{op_arg_type_str(k)}={count}")
        return f"OpArgContext({', '.join(parts)})"


def make_op_arg_context(*groups) -> OpArgContext:
    """MakeOpArgContext / GetOpArgContext. Non-group values are ignored; kinds 7/8 count but are skipped."""
    group_list = [g for g in groups if type(g) is OpArgGroup or isinstance(g, OpArgGroup)]
    total = 0
    for g in group_list:
        total += len(g.values)
    ctx = OpArgContext(total)
    slots = ctx._slots
    lists = ctx._lists
    exact = _EXACT_TAGS
    cursor = 1
    for g in group_list:
        kind = int(g.kind)
        if not 0 <= kind < OP_ARG_TYPE_NUM:
            continue
        begin = cursor
        if kind == OpArgDef.OP_OUTSHAPE_ARG:
            name = op_arg_type_str(kind)
            if len(g.values) != 2:
                raise UnsupportedTypeError(f"OP_OUTSHAPE takes exactly a (tensor, index) pair, got {len(g.values)} values")
            tensor, index = g.values
            if tensor is not None and not isinstance(tensor, Tensor):
                raise UnsupportedTypeError(
                    f"OP_OUTSHAPE element 0 has unsupported type {type(tensor).__name__}; the pair is (Tensor, index)")
            slots[cursor] = to_op_arg(tensor, name, 0)
            slots[cursor + 1] = OpArg(OpArgType.OPARG_INT, _checked_int64(int(index), name, 1))
            cursor += 2
        else:
            pos = 0
            for v in g.values:
                tv = type(v)
                tag = exact.get(tv)
                if tag is not None:
                    slots[cursor] = OpArg(tag, v)
                elif tv in _FLOAT_TAGS:
                    slots[cursor] = OpArg(_FLOAT_TAGS[tv], float(v))
                else:
                    slots[cursor] = to_op_arg(v, _KIND_NAMES[kind], pos)
                cursor += 1
                pos += 1
        lst = lists[kind]
        if lst[1] == 0:
            lst[0] = begin
            lst[2] = _KINDS[kind]
        lst[1] += cursor - begin
    return ctx


_KINDS = tuple(OpArgDef(k) for k in range(OP_ARG_TYPE_NUM))


get_op_arg_context = make_op_arg_context


def destroy_op_arg_context(ctx: OpArgContext | None) -> None:
    """DestroyOpArgContext: None is a no-op; a second destroy is harmless and only counted."""
    if ctx is None:
        return
    ctx.destroy_count += 1
    if ctx.destroy_count == 1:
        ctx._slots = []


def contains_op_arg_type(ctx: OpArgContext, kind: int) -> bool:
    return ctx.contains_op_arg_type(kind)


def get_op_arg(ctx: OpArgContext, kind: int) -> OpArgList | None:
    return ctx.get_op_arg(kind)


def append_op_workspace_arg(ctx: OpArgContext, tensor_list: TensorList | None) -> None:
    ctx.append_op_workspace_arg(tensor_list)


def flatten_tensors(args: list[OpArg], *, keep_null_list_elements: bool = True) -> list[Tensor | None]:
    """Graph flattening: null ACLTENSOR entries dropped, list elements expanded (null elements kept), a null
    list contributes nothing, other tags ignored (BuildGraph step 1)."""
    out: list[Tensor | None] = []
    for tag, value in args:
        if value is None:
            continue
        if tag is _TAG_TENSOR or tag == _TAG_TENSOR:
            out.append(value)
        elif tag == _TAG_TENSOR_LIST:
            for t in value.tensors:
                if t is not None or keep_null_list_elements:
                    out.append(t)
    return out


_TAG_TENSOR = OpArgType.OPARG_ACLTENSOR
_TAG_TENSOR_LIST = OpArgType.OPARG_ACLTENSOR_LIST


def graph_lists(args: OpArgContext, with_outshape: bool) -> tuple[list, list, list]:
    """A launcher's graph-node lists (INPUT, OUTPUT, WORKSPACE, with OUTSHAPE tensors added to the workspaces
    for the AI Core explicit path): shared by the executor and the launchers."""
    inputs = flatten_tensors(args.kind_args(0))  # null ACLTENSOR dropped, null list elements kept (BuildGraph)
    outputs = flatten_tensors(args.kind_args(1))
    workspaces = flatten_tensors(args.kind_args(3))
    if with_outshape:
        workspaces += [a.value for a in args.kind_args(4)
                       if a.type == OpArgType.OPARG_ACLTENSOR and a.value is not None]
    return inputs, outputs, workspaces


__all__ = [
    "OpArgDef", "OpArgType", "OpArg", "OpArgList", "OpArgContext", "OpArgGroup", "OP_ARG_TYPE_NUM", "Null",
    "NULL_TENSOR", "NULL_TENSOR_LIST", "NULL_SCALAR", "NULL_STRING", "NULL_INT_ARRAY", "NULL_FLOAT_ARRAY",
    "NULL_BOOL_ARRAY", "MemsetWorkspace", "to_op_arg", "op_input", "op_output", "op_attr", "op_workspace",
    "op_outshape", "op_option", "op_exec_mode", "op_mode", "op_memset", "op_empty", "OP_EMPTY_ARG",
    "make_op_arg_context", "get_op_arg_context", "destroy_op_arg_context", "contains_op_arg_type", "get_op_arg",
    "append_op_workspace_arg", "op_arg_type_str", "flatten_tensors", "graph_lists", "Format",
]

