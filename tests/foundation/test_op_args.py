"""OpArgDef / OpArgType / OpArgContext: kinds, the element->tag mapping, the reserved workspace slot,
group concatenation, queries, destruction, and a property test over random contexts (op-args.md)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.acl import (BoolArray, DataType, FloatArray, Format, Fp16Array, IntArray, Scalar, ScalarList, Tensor,
                       TensorList)
from opsim.errors import (InvalidArgumentError, SimulationError, UnsupportedTypeError, UseAfterDestroyError)
from opsim.opdev.op_args import (NULL_BOOL_ARRAY, NULL_FLOAT_ARRAY, NULL_INT_ARRAY, NULL_SCALAR, NULL_STRING,
                                 NULL_TENSOR, NULL_TENSOR_LIST, OP_ARG_TYPE_NUM, OP_EMPTY_ARG, MemsetWorkspace,
                                 OpArg, OpArgDef, OpArgType, append_op_workspace_arg, contains_op_arg_type,
                                 destroy_op_arg_context, flatten_tensors, get_op_arg, get_op_arg_context,
                                 make_op_arg_context, op_arg_type_str, op_attr, op_empty, op_exec_mode, op_input,
                                 op_memset, op_mode, op_option, op_outshape, op_output, op_workspace, to_op_arg)
from opsim.opdev.op_def import OpExecMode, OpImplMode

T = OpArgType
K = OpArgDef
INPUT, OUTPUT, ATTR, WORKSPACE, OUTSHAPE, OPTION, MODE = range(7)


# ---- enums ------------------------------------------------------------------------------------------

def test_op_arg_def_values() -> None:
    assert {k.name: int(k) for k in OpArgDef} == {
        "OP_INPUT_ARG": 0, "OP_OUTPUT_ARG": 1, "OP_ATTR_ARG": 2, "OP_WORKSPACE_ARG": 3, "OP_OUTSHAPE_ARG": 4,
        "OP_OPTION_ARG": 5, "OP_EXEC_MODE_ARG": 6, "OP_MEMSET_ARG": 7, "OP_EMPTY_ARG": 8, "OP_ARG_DEF_BUTT": 9}
    assert OP_ARG_TYPE_NUM == 7 == K.OP_EXEC_MODE_ARG + 1


@pytest.mark.parametrize("kind,name", [
    (0, "input"), (1, "output"), (2, "attr"), (3, "workspace"), (4, "outshape"), (5, "option"), (6, "mode"),
    (7, "memset"), (8, "empty"), (9, "unknown"), (10, "unknown"), (255, "unknown"), (-1, "unknown"),
])
def test_op_arg_type_str(kind: int, name: str) -> None:
    assert op_arg_type_str(kind) == name


def test_op_arg_type_values() -> None:
    assert [(t.name, int(t)) for t in OpArgType] == [
        ("OPARG_ACLTENSOR", 0), ("OPARG_ACLTENSOR_LIST", 1), ("OPARG_ACLSCALAR", 2), ("OPARG_STRING", 3),
        ("OPARG_BOOL", 4), ("OPARG_INT", 5), ("OPARG_UINT", 6), ("OPARG_FLOAT", 7), ("OPARG_DOUBLE", 8),
        ("OPARG_DATATYPE", 9), ("OPARG_INT_LIST", 10), ("OPARG_UINT_LIST", 11), ("OPARG_FLOAT_LIST", 12),
        ("OPARG_BOOL_LIST", 13), ("OPARG_IMPLMODE", 14), ("OPARG_MEMSET_WORKSPACE", 15)]


# ---- element -> tag mapping (C++ overload resolution) -----------------------------------------------

_TENSOR = Tensor([2, 2], name="t")
_TLIST = TensorList([_TENSOR, None])
_SCALAR = Scalar(1.0)
_IARR, _FARR, _BARR = IntArray([1, 2]), FloatArray([0.5]), BoolArray([True])
_MEMSET = MemsetWorkspace([(0x1000, _TENSOR)])

SAME = object()  # "the stored value is the very object passed"

TAG_CASES = [
    # (id, value, tag, stored value)
    ("None", None, T.OPARG_ACLTENSOR, None),
    ("Tensor", _TENSOR, T.OPARG_ACLTENSOR, SAME),
    ("TensorList", _TLIST, T.OPARG_ACLTENSOR_LIST, SAME),
    ("Scalar", _SCALAR, T.OPARG_ACLSCALAR, SAME),
    ("str", "ReduceSum", T.OPARG_STRING, "ReduceSum"),
    ("empty-str", "", T.OPARG_STRING, ""),
    ("True", True, T.OPARG_BOOL, 1),
    ("False", False, T.OPARG_BOOL, 0),
    ("np.bool_", np.bool_(True), T.OPARG_BOOL, 1),
    ("int", 7, T.OPARG_INT, 7),
    ("int-neg", -2, T.OPARG_INT, -2),
    ("np.int8", np.int8(-3), T.OPARG_INT, -3),
    ("np.int16", np.int16(300), T.OPARG_INT, 300),
    ("np.int32", np.int32(-70000), T.OPARG_INT, -70000),
    ("np.int64(-2) TestAllType", np.int64(-2), T.OPARG_INT, -2),
    ("np.uint8", np.uint8(255), T.OPARG_INT, 255),
    ("np.uint16", np.uint16(65535), T.OPARG_INT, 65535),
    ("np.uint64(2) TestAllType", np.uint64(2), T.OPARG_INT, 2),
    ("np.uint64-max same 8 bytes", np.uint64(2 ** 64 - 1), T.OPARG_INT, -1),
    ("int-uint64-range", 2 ** 63, T.OPARG_INT, -(2 ** 63)),
    ("Format", Format.FORMAT_FRACTAL_NZ, T.OPARG_INT, 29),
    ("OpExecMode", OpExecMode.OP_EXEC_MODE_HF32, T.OPARG_INT, 1),
    ("np.uint32", np.uint32(7), T.OPARG_UINT, 7),
    ("np.uint32-max zero-extended", np.uint32(0xFFFFFFFF), T.OPARG_UINT, 0xFFFFFFFF),
    ("np.uint32 OpExecMode", np.uint32(OpExecMode.OP_EXEC_MODE_HF32), T.OPARG_UINT, 1),
    ("np.float32", np.float32(1.25), T.OPARG_FLOAT, 1.25),
    ("float", 0.1, T.OPARG_DOUBLE, 0.1),
    ("np.float64", np.float64(-2.5), T.OPARG_DOUBLE, -2.5),
    ("DataType", DataType.DT_BF16, T.OPARG_DATATYPE, 27),
    ("DataType-float", DataType.DT_FLOAT, T.OPARG_DATATYPE, 0),
    ("OpImplMode", OpImplMode.IMPL_MODE_HIGH_PRECISION, T.OPARG_IMPLMODE, 0x4),
    ("IntArray", _IARR, T.OPARG_INT_LIST, SAME),
    ("FloatArray", _FARR, T.OPARG_FLOAT_LIST, SAME),
    ("BoolArray", _BARR, T.OPARG_BOOL_LIST, SAME),
    ("MemsetWorkspace", _MEMSET, T.OPARG_MEMSET_WORKSPACE, SAME),
    ("NULL_TENSOR", NULL_TENSOR, T.OPARG_ACLTENSOR, None),
    ("NULL_TENSOR_LIST", NULL_TENSOR_LIST, T.OPARG_ACLTENSOR_LIST, None),
    ("NULL_SCALAR", NULL_SCALAR, T.OPARG_ACLSCALAR, None),
    ("NULL_STRING", NULL_STRING, T.OPARG_STRING, None),
    ("NULL_INT_ARRAY", NULL_INT_ARRAY, T.OPARG_INT_LIST, None),
    ("NULL_FLOAT_ARRAY", NULL_FLOAT_ARRAY, T.OPARG_FLOAT_LIST, None),
    ("NULL_BOOL_ARRAY", NULL_BOOL_ARRAY, T.OPARG_BOOL_LIST, None),
]


@pytest.mark.parametrize("value,tag,stored", [c[1:] for c in TAG_CASES], ids=[c[0] for c in TAG_CASES])
def test_element_tag(value, tag: OpArgType, stored) -> None:
    arg = to_op_arg(value)
    assert arg.type is tag
    if stored is SAME:
        assert arg.value is value
    else:
        assert arg.value == stored and type(arg.value) is type(stored)
    # The same mapping applies inside a context.
    (in_ctx,) = make_op_arg_context(op_attr(value)).attrs()
    assert in_ctx.type is tag
    assert in_ctx.value is arg.value or in_ctx.value == arg.value


def test_int_tags_are_plain_python_ints() -> None:
    # Downstream key builders serialise these as 8 bytes; enums and numpy scalars must not leak through.
    for v in (Format.FORMAT_ND, OpExecMode.OP_EXEC_MODE_DEFAULT, np.int16(3), np.uint64(5)):
        assert type(to_op_arg(v).value) is int
    assert type(to_op_arg(DataType.DT_INT8).value) is int
    assert type(to_op_arg(OpImplMode.IMPL_MODE_DEFAULT).value) is int


def test_no_python_value_produces_uint_list() -> None:
    assert all(c[2] is not T.OPARG_UINT_LIST for c in TAG_CASES)


def test_string_is_copied_as_a_plain_str() -> None:
    class Name(str):
        pass

    arg = to_op_arg(Name("axis"))
    assert arg.type is T.OPARG_STRING and arg.value == "axis" and type(arg.value) is str


@pytest.mark.parametrize("bad,type_name", [
    (Fp16Array([1.0]), "Fp16Array"),
    (ScalarList([Scalar(1.0)]), "ScalarList"),
    ([1, 2], "list"),
    ((1, 2), "tuple"),
    ({"a": 1}, "dict"),
    (object(), "object"),
    (np.float16(1.0), "float16"),
    (b"bytes", "bytes"),
])
def test_unsupported_type_names_group_position_and_type(bad, type_name: str) -> None:
    with pytest.raises(UnsupportedTypeError) as info:
        make_op_arg_context(op_input(_TENSOR), op_attr(1, "x", bad))
    msg = str(info.value)
    assert "OP_ATTR" in msg and "element 2" in msg and type_name in msg
    assert isinstance(info.value, TypeError)


def test_unsupported_type_hints_at_the_fix() -> None:
    with pytest.raises(UnsupportedTypeError, match="IntArray"):
        to_op_arg([1, 2], "attr", 0)
    with pytest.raises(UnsupportedTypeError, match="convert it to a tensor"):
        to_op_arg(Fp16Array([1.0]), "attr", 0)
    with pytest.raises(UnsupportedTypeError, match="OP_INPUT element 1"):
        make_op_arg_context(op_input(_TENSOR, [_TENSOR]))


def test_integer_wider_than_64_bits_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError, match="OP_ATTR element 0 = 18446744073709551616 does not fit"):
        make_op_arg_context(op_attr(2 ** 64))
    with pytest.raises(InvalidArgumentError, match="does not fit"):
        to_op_arg(-(2 ** 63) - 1)
    assert to_op_arg(-(2 ** 63)).value == -(2 ** 63)


# ---- context building -------------------------------------------------------------------------------

def _tensors(n: int) -> list[Tensor]:
    return [Tensor([i + 1], name=f"t{i}") for i in range(n)]


def test_groups_land_in_their_kind_lists() -> None:
    a, b, c = _tensors(3)
    ctx = make_op_arg_context(op_input(a, b), op_output(c), op_attr(1, 2.0, "mode"),
                              op_option(OpImplMode.IMPL_MODE_HIGH_PERFORMANCE), op_mode(np.uint32(1)))
    assert [x.value for x in ctx.inputs()] == [a, b]
    assert [x.value for x in ctx.outputs()] == [c]
    assert ctx.attrs() == [OpArg(T.OPARG_INT, 1), OpArg(T.OPARG_DOUBLE, 2.0), OpArg(T.OPARG_STRING, "mode")]
    assert ctx.get_op_arg(OPTION).args == [OpArg(T.OPARG_IMPLMODE, 2)]
    assert ctx.get_op_arg(MODE).args == [OpArg(T.OPARG_UINT, 1)]
    for kind in (INPUT, OUTPUT, ATTR, OPTION, MODE):
        lst = ctx.get_op_arg(kind)
        assert lst.arg_type == kind and ctx.contains_op_arg_type(kind)
    assert ctx.slot_count == 1 + 2 + 1 + 3 + 1 + 1
    assert "input=2" in repr(ctx)


def test_absent_kinds_give_empty_lists_without_storage() -> None:
    ctx = make_op_arg_context(op_input(None))
    for kind in (OUTPUT, ATTR, WORKSPACE, OUTSHAPE, OPTION, MODE):
        lst = ctx.get_op_arg(kind)
        assert lst is not None and lst.count == 0 and len(lst) == 0 and lst.args == []
        assert not lst.has_storage and lst.arg_type is None
        assert not ctx.contains_op_arg_type(kind)
    # A null tensor inside OP_INPUT is one element.
    assert ctx.inputs() == [OpArg(T.OPARG_ACLTENSOR, None)] and ctx.contains_op_arg_type(INPUT)


def test_context_with_no_groups() -> None:
    ctx = make_op_arg_context()
    assert ctx.slot_count == 1
    assert not any(ctx.contains_op_arg_type(k) for k in range(10))


def test_non_group_values_are_ignored() -> None:
    a, b = _tensors(2)
    ctx = make_op_arg_context(op_input(a), 42, "loose", None, op_output(b))
    assert [x.value for x in ctx.inputs()] == [a] and [x.value for x in ctx.outputs()] == [b]
    assert ctx.slot_count == 3


def test_get_op_arg_context_is_make_op_arg_context() -> None:
    assert get_op_arg_context is make_op_arg_context


def test_adjacent_groups_of_one_kind_concatenate() -> None:
    a, b, c = _tensors(3)
    ctx = make_op_arg_context(op_input(a), op_input(b, c), op_output(a))
    assert [x.value for x in ctx.inputs()] == [a, b, c]
    assert ctx.get_op_arg(INPUT).count == 3


def test_non_adjacent_repeat_spans_the_flat_slots() -> None:
    # input, output, input: the input list starts at the first input and its count covers the output slot.
    a, b, c = _tensors(3)
    ctx = make_op_arg_context(op_input(a), op_output(b), op_input(c))
    inputs = ctx.get_op_arg(INPUT)
    assert inputs.count == 2
    assert [x.value for x in inputs] == [a, b]  # c is not reachable; the output slot is
    assert [x.value for x in ctx.outputs()] == [b]


def test_empty_first_group_does_not_pin_the_list_start() -> None:
    # count stays 0 after an empty group, so the next group of the kind sets the start again.
    a, b = _tensors(2)
    ctx = make_op_arg_context(op_input(), op_output(a), op_input(b))
    assert [x.value for x in ctx.inputs()] == [b]


def test_memset_and_empty_groups_are_counted_but_not_stored() -> None:
    a, b = _tensors(2)
    ctx = make_op_arg_context(op_input(a), op_memset(1, 2, 3), OP_EMPTY_ARG, op_empty(), op_output(b))
    for kind in (7, 8, 9, 10):
        assert ctx.get_op_arg(kind) is None
        assert ctx.contains_op_arg_type(kind) is False
    assert ctx.get_op_arg(-1) is None and not ctx.contains_op_arg_type(-1)
    assert ctx.slot_count == 1 + 1 + 3 + 0 + 0 + 1  # memset elements still size the block
    # Skipped groups do not advance the cursor: the output directly follows the input.
    assert ctx.get_op_arg(OUTPUT).start == ctx.get_op_arg(INPUT).start + 1
    assert [x.value for x in ctx.outputs()] == [b]
    assert OP_EMPTY_ARG.kind is K.OP_EMPTY_ARG and len(OP_EMPTY_ARG) == 0 and op_empty() is OP_EMPTY_ARG


def test_memset_between_same_kind_groups_keeps_them_adjacent() -> None:
    a, b = _tensors(2)
    ctx = make_op_arg_context(op_input(a), op_memset(9), op_input(b))
    assert [x.value for x in ctx.inputs()] == [a, b]


def test_outshape_pair_gives_tensor_and_int_index() -> None:
    shape_t, out0, out1 = _tensors(3)
    ctx = make_op_arg_context(op_output(out0, out1), op_outshape(shape_t, 0), op_outshape(None, np.uint64(1)))
    lst = ctx.get_op_arg(OUTSHAPE)
    assert lst.count == 4 and lst.arg_type == OUTSHAPE
    assert ctx.outshapes() == [OpArg(T.OPARG_ACLTENSOR, shape_t), OpArg(T.OPARG_INT, 0),
                               OpArg(T.OPARG_ACLTENSOR, None), OpArg(T.OPARG_INT, 1)]
    assert ctx.slot_count == 1 + 2 + 4


def test_outshape_rejects_malformed_pairs() -> None:
    from opsim.opdev.op_args import OpArgGroup
    with pytest.raises(UnsupportedTypeError, match="exactly a \\(tensor, index\\) pair, got 3"):
        make_op_arg_context(OpArgGroup(K.OP_OUTSHAPE_ARG, (None, 0, 1)))
    with pytest.raises(UnsupportedTypeError, match="OP_OUTSHAPE element 0 has unsupported type TensorList"):
        make_op_arg_context(op_outshape(TensorList([]), 0))


def test_exec_mode_helpers() -> None:
    assert op_mode is op_exec_mode
    ctx = make_op_arg_context(op_mode(OpExecMode.OP_EXEC_MODE_HF32))
    assert ctx.get_op_arg(MODE).args == [OpArg(T.OPARG_INT, 1)]  # the scoped enum itself is INT, not UINT


# ---- the reserved workspace slot --------------------------------------------------------------------

def test_append_fills_reserved_slot_zero() -> None:
    ws = TensorList(_tensors(2))
    ctx = make_op_arg_context(op_input(_TENSOR))
    ctx.append_op_workspace_arg(ws)
    lst = ctx.get_op_arg(WORKSPACE)
    assert lst.start == 0 and lst.count == 1
    assert ctx.workspaces() == [OpArg(T.OPARG_ACLTENSOR_LIST, ws)]
    assert ctx.contains_op_arg_type(WORKSPACE)
    assert lst.arg_type is None  # AppendOpWorkspaceArg does not set argType
    assert ctx.slot_count == 2  # no extra slot: slot 0 was always reserved


def test_explicit_workspace_beats_append() -> None:
    explicit, appended = TensorList(_tensors(1)), TensorList(_tensors(1))
    ctx = make_op_arg_context(op_input(_TENSOR), op_workspace(explicit))
    append_op_workspace_arg(ctx, appended)
    assert ctx.workspaces() == [OpArg(T.OPARG_ACLTENSOR_LIST, explicit)]
    assert ctx.get_op_arg(WORKSPACE).start != 0


def test_second_append_is_ignored() -> None:
    first, second = TensorList([]), TensorList([])
    ctx = make_op_arg_context(op_input(_TENSOR))
    ctx.append_op_workspace_arg(first)
    ctx.append_op_workspace_arg(second)
    assert ctx.workspaces() == [OpArg(T.OPARG_ACLTENSOR_LIST, first)]


def test_empty_workspace_declaration_counts_as_absent() -> None:
    ctx = make_op_arg_context(op_input(_TENSOR), op_workspace())
    lst = get_op_arg(ctx, WORKSPACE)
    assert lst.has_storage and lst.count == 0 and lst.arg_type == WORKSPACE
    assert not contains_op_arg_type(ctx, WORKSPACE)
    ws = TensorList(_tensors(1))
    ctx.append_op_workspace_arg(ws)
    assert ctx.workspaces() == [OpArg(T.OPARG_ACLTENSOR_LIST, ws)]
    assert ctx.get_op_arg(WORKSPACE).start == 0


def test_null_tensor_list_workspace_counts_as_contains() -> None:
    ctx = make_op_arg_context(op_input(_TENSOR))
    ctx.append_op_workspace_arg(None)
    assert ctx.contains_op_arg_type(WORKSPACE)
    assert ctx.workspaces() == [OpArg(T.OPARG_ACLTENSOR_LIST, None)]
    ctx.append_op_workspace_arg(TensorList([]))  # already "contains": ignored
    assert ctx.workspaces()[0].value is None

    explicit_null = make_op_arg_context(op_workspace(NULL_TENSOR_LIST))
    assert explicit_null.contains_op_arg_type(WORKSPACE)
    explicit_null.append_op_workspace_arg(TensorList([]))
    assert explicit_null.workspaces() == [OpArg(T.OPARG_ACLTENSOR_LIST, None)]


# ---- visiting ---------------------------------------------------------------------------------------

def test_visit_stops_at_first_non_zero() -> None:
    ctx = make_op_arg_context(op_attr(1, 2, 3, 4))
    seen = []

    def fn(arg: OpArg) -> int:
        seen.append(arg.value)
        return 7 if arg.value == 2 else 0

    assert ctx.get_op_arg(ATTR).visit(fn) == 7 and seen == [1, 2]
    seen.clear()
    assert ctx.get_op_arg(ATTR).visit(lambda a: seen.append(a.value) or 0) == 0 and seen == [1, 2, 3, 4]
    assert ctx.get_op_arg(ATTR)[3] == OpArg(T.OPARG_INT, 4)
    assert [a.value for a in ctx.get_op_arg(ATTR)] == [1, 2, 3, 4]


def test_visit_at_checks_the_kind_range_not_the_count() -> None:
    outs = _tensors(9)
    ctx = make_op_arg_context(op_output(*outs))
    lst = ctx.get_op_arg(OUTPUT)
    assert lst.visit_at(6, lambda a: a.value) is outs[6]
    calls = []
    assert lst.visit_at(7, calls.append) is None  # index >= 7: silently skipped although count is 9
    assert lst.visit_at(8, calls.append) is None
    assert lst.visit_at(-1, calls.append) is None
    assert calls == []

    short = make_op_arg_context(op_output(*outs[:2])).get_op_arg(OUTPUT)
    assert short.visit_at(1, lambda a: a.value) is outs[1]
    with pytest.raises(SimulationError, match=r"visit_at\(3\) past a list of 2 entries"):
        short.visit_at(3, calls.append)
    assert calls == []


# ---- destruction ------------------------------------------------------------------------------------

def test_destroy_none_is_a_no_op() -> None:
    destroy_op_arg_context(None)


def test_destroy_twice_is_harmless_and_counted() -> None:
    ctx = make_op_arg_context(op_input(_TENSOR), op_attr("s"))
    assert not ctx.destroyed and ctx.destroy_count == 0
    destroy_op_arg_context(ctx)
    destroy_op_arg_context(ctx)
    assert ctx.destroyed and ctx.destroy_count == 2
    assert repr(ctx) == "OpArgContext(<destroyed>)"


def test_destroy_does_not_free_referenced_objects() -> None:
    ws = TensorList([_TENSOR])
    ctx = make_op_arg_context(op_input(_TENSOR), op_workspace(ws))
    destroy_op_arg_context(ctx)
    assert ws.tensors == [_TENSOR] and _TENSOR.view_shape == (2, 2)


@pytest.mark.parametrize("use", [
    lambda c: c.get_op_arg(INPUT),
    lambda c: c.contains_op_arg_type(INPUT),
    lambda c: c.append_op_workspace_arg(None),
    lambda c: c.inputs(),
    lambda c: c.slot_count,
    lambda c: get_op_arg(c, 8),
], ids=["get_op_arg", "contains", "append", "inputs", "slot_count", "get_op_arg-unstored-kind"])
def test_use_after_destroy_raises(use) -> None:
    ctx = make_op_arg_context(op_input(_TENSOR))
    destroy_op_arg_context(ctx)
    with pytest.raises(UseAfterDestroyError, match="after DestroyOpArgContext"):
        use(ctx)


def test_list_taken_before_destroy_cannot_be_read_after() -> None:
    ctx = make_op_arg_context(op_input(_TENSOR))
    lst = ctx.get_op_arg(INPUT)
    destroy_op_arg_context(ctx)
    with pytest.raises(UseAfterDestroyError):
        lst.args
    with pytest.raises(UseAfterDestroyError):
        lst.visit(lambda a: 0)


# ---- graph flattening -------------------------------------------------------------------------------

def test_flatten_tensors() -> None:
    a, b, c = _tensors(3)
    args = [OpArg(T.OPARG_ACLTENSOR, a), OpArg(T.OPARG_ACLTENSOR, None),
            OpArg(T.OPARG_ACLTENSOR_LIST, TensorList([b, None, c])), OpArg(T.OPARG_ACLTENSOR_LIST, None),
            OpArg(T.OPARG_INT, 3), OpArg(T.OPARG_ACLSCALAR, _SCALAR)]
    assert flatten_tensors(args) == [a, b, None, c]
    assert flatten_tensors(args, keep_null_list_elements=False) == [a, b, c]


# ---- property: what goes in comes out ---------------------------------------------------------------

_TL_POOL = [TensorList(_tensors(2)), TensorList([])]
_T_POOL = _tensors(3)

# (strategy of a value, function giving the expected OpArg)
_value_strategies = st.one_of(
    st.sampled_from(_T_POOL + [None]),
    st.sampled_from(_TL_POOL + [NULL_TENSOR_LIST]),
    st.just(_SCALAR),
    st.text(max_size=6),
    st.booleans(),
    st.integers(-(2 ** 63), 2 ** 64 - 1),
    st.integers(-(2 ** 63), 2 ** 63 - 1).map(np.int64),
    st.integers(0, 2 ** 32 - 1).map(np.uint32),
    st.integers(0, 2 ** 64 - 1).map(np.uint64),
    st.integers(-128, 127).map(np.int8),
    st.floats(allow_nan=False, width=32).map(np.float32),
    st.floats(allow_nan=False),
    st.sampled_from(list(DataType)),
    st.sampled_from(list(Format)),
    st.sampled_from(list(OpImplMode)),
    st.sampled_from(list(OpExecMode)),
    st.sampled_from([_IARR, _FARR, _BARR, NULL_INT_ARRAY, NULL_FLOAT_ARRAY, NULL_BOOL_ARRAY, NULL_SCALAR]),
)


def _expected(value) -> OpArg:
    """The reference mapping of op-args.md §3, written independently of to_op_arg."""
    if value is None or isinstance(value, Tensor):
        return OpArg(T.OPARG_ACLTENSOR, value)
    if isinstance(value, TensorList):
        return OpArg(T.OPARG_ACLTENSOR_LIST, value)
    if isinstance(value, Scalar):
        return OpArg(T.OPARG_ACLSCALAR, value)
    if value is NULL_TENSOR_LIST:
        return OpArg(T.OPARG_ACLTENSOR_LIST, None)
    if value is NULL_SCALAR:
        return OpArg(T.OPARG_ACLSCALAR, None)
    nulls = {id(NULL_INT_ARRAY): T.OPARG_INT_LIST, id(NULL_FLOAT_ARRAY): T.OPARG_FLOAT_LIST,
             id(NULL_BOOL_ARRAY): T.OPARG_BOOL_LIST}
    if id(value) in nulls:
        return OpArg(nulls[id(value)], None)
    arrays = {IntArray: T.OPARG_INT_LIST, FloatArray: T.OPARG_FLOAT_LIST, BoolArray: T.OPARG_BOOL_LIST}
    if type(value) in arrays:
        return OpArg(arrays[type(value)], value)
    if isinstance(value, str):
        return OpArg(T.OPARG_STRING, value)
    if isinstance(value, bool):
        return OpArg(T.OPARG_BOOL, int(value))
    if isinstance(value, DataType):
        return OpArg(T.OPARG_DATATYPE, int(value))
    if isinstance(value, OpImplMode):
        return OpArg(T.OPARG_IMPLMODE, int(value))
    if isinstance(value, np.uint32):
        return OpArg(T.OPARG_UINT, int(value))
    if isinstance(value, np.float32):
        return OpArg(T.OPARG_FLOAT, float(value))
    if isinstance(value, float):
        return OpArg(T.OPARG_DOUBLE, value)
    v = int(value)  # every other integer or enum: the int64 view of its 8 bytes
    return OpArg(T.OPARG_INT, v - 2 ** 64 if v >= 2 ** 63 else v)


def _same(got: OpArg, want: OpArg) -> bool:
    if got.type is not want.type:
        return False
    if isinstance(want.value, float) and math.isnan(want.value):
        return math.isnan(got.value)
    if want.value is None or isinstance(want.value, (Tensor, TensorList, Scalar, IntArray, FloatArray, BoolArray)):
        return got.value is want.value
    return got.value == want.value and type(got.value) is type(want.value)


_MAKERS = {INPUT: op_input, OUTPUT: op_output, ATTR: op_attr, WORKSPACE: op_workspace, OPTION: op_option,
           MODE: op_mode, 7: op_memset}


@st.composite
def _group(draw, kind: int):
    if kind == OUTSHAPE:
        tensor = draw(st.sampled_from(_T_POOL + [None]))
        index = draw(st.integers(0, 2 ** 64 - 1))
        return op_outshape(tensor, index), [_expected(tensor), _expected(index)]
    if kind == 8:
        return OP_EMPTY_ARG, []
    values = draw(st.lists(_value_strategies, max_size=4))
    return _MAKERS[kind](*values), [_expected(v) for v in values]


@st.composite
def _adjacent_context(draw):
    """Distinct stored kinds in random order, each as a run of 1..3 adjacent groups; kinds 7/8 sprinkled in."""
    kinds = draw(st.permutations(range(OP_ARG_TYPE_NUM)))
    kinds = kinds[:draw(st.integers(0, OP_ARG_TYPE_NUM))]
    groups = []
    for kind in kinds:
        for _ in range(draw(st.integers(1, 3))):
            groups.append((kind, *draw(_group(kind))))
            if draw(st.integers(0, 4)) == 0:
                unstored = draw(st.sampled_from([7, 8]))
                groups.append((unstored, *draw(_group(unstored))))
    return groups


@given(_adjacent_context(), st.sampled_from(_TL_POOL + [None]))
@settings(max_examples=150, deadline=None)
def test_random_adjacent_contexts_round_trip(groups, appended) -> None:
    ctx = make_op_arg_context(*(g for _, g, _ in groups))
    assert ctx.slot_count == 1 + sum(len(exp) for _, _, exp in groups)
    for kind in range(OP_ARG_TYPE_NUM):
        want = [a for k, _, exp in groups if k == kind for a in exp]
        lst = ctx.get_op_arg(kind)
        got = lst.args
        assert lst.count == len(want) == len(got)
        assert all(_same(g, w) for g, w in zip(got, want)), (kind, got, want)
        assert ctx.contains_op_arg_type(kind) == bool(want)
        present = any(k == kind for k, _, _ in groups)
        assert lst.has_storage == present
        assert lst.arg_type == (OpArgDef(kind) if present else None)
    for kind in (7, 8, 9):
        assert ctx.get_op_arg(kind) is None and not ctx.contains_op_arg_type(kind)

    before = ctx.workspaces()
    had_workspace = ctx.contains_op_arg_type(WORKSPACE)
    ctx.append_op_workspace_arg(appended)
    if had_workspace:
        assert ctx.workspaces() == before
    else:
        assert len(ctx.workspaces()) == 1 and _same(ctx.workspaces()[0], OpArg(T.OPARG_ACLTENSOR_LIST, appended))
    destroy_op_arg_context(ctx)
    with pytest.raises(UseAfterDestroyError):
        ctx.inputs()


@given(st.lists(st.sampled_from(range(9)).flatmap(lambda k: _group(k).map(lambda g: (k, *g))), max_size=8))
@settings(max_examples=150, deadline=None)
def test_random_contexts_follow_the_flat_slot_rule(groups) -> None:
    """Any order: each list starts where its first group (met while its count was 0) began, spans count slots."""
    ctx = make_op_arg_context(*(g for _, g, _ in groups))
    flat: list[OpArg] = []  # slot 1.. in order; kinds 7/8 are not written
    start = [None] * OP_ARG_TYPE_NUM
    count = [0] * OP_ARG_TYPE_NUM
    for kind, _, exp in groups:
        if kind >= OP_ARG_TYPE_NUM:
            continue
        if count[kind] == 0:
            start[kind] = len(flat)
        flat.extend(exp)
        count[kind] += len(exp)
    for kind in range(OP_ARG_TYPE_NUM):
        got = ctx.get_op_arg(kind).args
        want = flat[start[kind]:start[kind] + count[kind]] if start[kind] is not None else []
        assert len(got) == len(want) == count[kind]
        assert all(_same(g, w) for g, w in zip(got, want))
