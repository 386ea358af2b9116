"""op_def enumerations and the op type dictionary (OpTypeDict)."""
from __future__ import annotations

import itertools

import pytest

from opsim.errors import InvalidArgumentError
from opsim.opdev.op_def import (CoreType, DsaTaskType, MemsetVersion, OpExecMode, OpImplMode, OpIOType, RepeatMode,
                                UnknowShapeOpType)
from opsim.opdev.op_types import (INTERNAL_OP_TYPES, OP_TYPE_DICT, RESERVED_OP_TYPE, OpTypeDict,
                                  get_all_op_type_size, op_type_id, op_type_name, register_op_type)


# ---- op_def enumerations ----------------------------------------------------------------------------

@pytest.mark.parametrize("enum,expected", [
    (CoreType, {"AI_CORE": 0, "AI_CPU": 1, "DVPP": 2, "NO_CALC": 3, "DIRECT_INVOKE": 4}),
    (RepeatMode, {"DEFAULT": 0, "UNREPEATABLE": 1, "REPEAT": 2}),
    (UnknowShapeOpType, {"DEPEND_IN_SHAPE": 1, "DEPEND_CONST_VALUE": 2, "DEPEND_SHAPE_RANGE": 3,
                         "DEPEND_COMPUTE": 4}),
    (DsaTaskType, {"DSA_RANDOM_NORMAL": 0, "DSA_RANDOM_TRUNCATED_NORMAL": 1, "DSA_RANDOM_UNIFORM": 2,
                   "DSA_GEN_BIT_MASK": 3}),
    (OpIOType, {"OP_INPUT_TYPE": 0, "OP_OUTPUT_TYPE": 1, "OP_WORKSPACE_TYPE": 2}),
    (OpImplMode, {"IMPL_MODE_DEFAULT": 0x1, "IMPL_MODE_HIGH_PERFORMANCE": 0x2, "IMPL_MODE_HIGH_PRECISION": 0x4,
                  "IMPL_MODE_SUPER_PERFORMANCE": 0x8, "IMPL_MODE_SUPPORT_OUT_OF_BOUND_INDEX": 0x10,
                  "IMPL_MODE_ENABLE_FLOAT32_EXECUTION": 0x20, "IMPL_MODE_ENABLE_HI_FLOAT32_EXECUTION": 0x40,
                  "IMPL_MODE_KEEP_FP16": 0x80, "IMPL_MODE_RESERVED": 0xFFFFFFFF}),
    (OpExecMode, {"OP_EXEC_MODE_DEFAULT": 0, "OP_EXEC_MODE_HF32": 1, "OP_EXEC_MODE_RESERVED": 0xFFFFFFFF}),
    (MemsetVersion, {"MEMSET_V1": 0, "MEMSET_V1_ASCENDC": 1, "MEMSET_V2": 2}),
], ids=lambda x: x.__name__ if isinstance(x, type) else "")
def test_enum_values(enum, expected: dict[str, int]) -> None:
    assert {m.name: int(m) for m in enum} == expected


def test_impl_mode_flags_are_distinct_single_bits() -> None:
    flags = [m for m in OpImplMode if m is not OpImplMode.IMPL_MODE_RESERVED]
    assert all(int(f) & (int(f) - 1) == 0 for f in flags)
    assert all(int(a) & int(b) == 0 for a, b in itertools.combinations(flags, 2))


# ---- op type dictionary -----------------------------------------------------------------------------

def test_reserved_entry_and_internal_ops_come_first(op_type_dict: OpTypeDict) -> None:
    assert RESERVED_OP_TYPE == "BEGIN__"
    assert INTERNAL_OP_TYPES == ("MemSet", "MemSetV2", "NonFiniteCheck")
    assert op_type_dict.to_str(0) == "BEGIN__"
    assert [op_type_dict.to_op_type(n) for n in ("MemSet", "MemSetV2", "NonFiniteCheck")] == [1, 2, 3]
    assert op_type_dict.size() == 4  # the reserved entry counts
    assert op_type_dict.names() == ["MemSet", "MemSetV2", "NonFiniteCheck"]


def test_register_assigns_ids_in_order_and_is_idempotent(op_type_dict: OpTypeDict) -> None:
    assert op_type_dict.register("Add") == 4
    assert op_type_dict.register("Mul") == 5
    assert op_type_dict.register("Add") == 4
    assert op_type_dict.register("MemSet") == 1
    assert op_type_dict.size() == 6
    assert op_type_dict.to_str(5) == "Mul"


def test_unknown_names_and_ids(op_type_dict: OpTypeDict) -> None:
    assert op_type_dict.to_op_type("NoSuchOp") == 0
    assert op_type_dict.to_str(op_type_dict.size()) == ""
    assert op_type_dict.to_str(-1) == ""


def test_is_valid_excludes_the_reserved_id_and_out_of_range(op_type_dict: OpTypeDict) -> None:
    size = op_type_dict.size()
    assert not op_type_dict.is_valid(0)
    assert op_type_dict.is_valid(1) and op_type_dict.is_valid(size - 1)
    assert not op_type_dict.is_valid(size)
    assert not op_type_dict.is_valid(-1)


@pytest.mark.parametrize("bad", ["", None, 3])
def test_register_rejects_non_names(op_type_dict: OpTypeDict, bad) -> None:
    with pytest.raises(InvalidArgumentError, match="op type name must be a non-empty string"):
        op_type_dict.register(bad)


def test_dictionaries_are_independent() -> None:
    first, second = OpTypeDict(), OpTypeDict()
    first.register("OnlyInFirst")
    assert second.to_op_type("OnlyInFirst") == 0


def test_process_wide_dictionary_functions() -> None:
    assert OP_TYPE_DICT.to_str(0) == "BEGIN__"
    assert [op_type_id(n) for n in INTERNAL_OP_TYPES] == [1, 2, 3]
    name = "FoundationTestOnlyOp"  # a name no other module registers
    before = get_all_op_type_size()
    new_id = register_op_type(name)
    assert register_op_type(name) == new_id
    assert get_all_op_type_size() == max(before, new_id + 1)
    assert op_type_name(new_id) == name and op_type_id(name) == new_id
    assert OP_TYPE_DICT.is_valid(new_id)
