"""AclnnStatus: every code of the reference status table, and the two aliases."""
from __future__ import annotations

import pytest

from opsim.acl import ACLNN_SUCCESS, AclnnStatus

# The reference table (op_errno.h, kernel_utils.h), transcribed independently of the enum.
STATUS_TABLE = {
    "ACLNN_SUCCESS": 0,
    "ACLNN_ERR_PARAM_NULLPTR": 161001,
    "ACLNN_ERR_PARAM_INVALID": 161002,
    "ACLNN_ERR_RUNTIME_ERROR": 361001,
    "ACLNN_ERR_INNER": 561000,
    "ACLNN_ERR_INNER_INFERSHAPE_ERROR": 561001,
    "ACLNN_ERR_INNER_TILING_ERROR": 561002,
    "ACLNN_ERR_INNER_FIND_KERNEL_ERROR": 561003,
    "ACLNN_ERR_INNER_CREATE_EXECUTOR": 561101,
    "ACLNN_ERR_INNER_NOT_TRANS_EXECUTOR": 561102,
    "ACLNN_ERR_INNER_NULLPTR": 561103,
    "ACLNN_ERR_INNER_WRONG_ATTR_INFO_SIZE": 561104,
    "ACLNN_ERR_INNER_KEY_CONFLICT": 561105,
    "ACLNN_ERR_INNER_INVALID_IMPL_MODE": 561106,
    "ACLNN_ERR_INNER_OPP_PATH_NOT_FOUND": 561107,
    "ACLNN_ERR_INNER_LOAD_JSON_FAILED": 561108,
    "ACLNN_ERR_INNER_JSON_VALUE_NOT_FOUND": 561109,
    "ACLNN_ERR_INNER_JSON_FORMAT_INVALID": 561110,
    "ACLNN_ERR_INNER_JSON_DTYPE_INVALID": 561111,
    "ACLNN_ERR_INNER_OPP_KERNEL_PKG_NOT_FOUND": 561112,
    "ACLNN_ERR_INNER_OP_FILE_INVALID": 561113,
    "ACLNN_ERR_INNER_ATTR_NUM_OUT_OF_BOUND": 561114,
    "ACLNN_ERR_INNER_ATTR_LEN_NOT_ENOUGH": 561115,
    "ACLNN_ERR_INNER_INPUT_NUM_IN_JSON_TOO_LARGE": 561116,
    "ACLNN_ERR_INNER_INPUT_JSON_IS_NULL": 561117,
    "ACLNN_ERR_INNER_STATIC_WORKSPACE_INVALID": 561118,
    "ACLNN_ERR_INNER_STATIC_BLOCK_DIM_INVALID": 561119,
    "ACLNN_ERR_INNER_RUNTIME_INVALID_HANDLE": 561201,
}


@pytest.mark.parametrize("name,value", sorted(STATUS_TABLE.items(), key=lambda kv: kv[1]))
def test_every_status_code_has_its_reference_value(name: str, value: int) -> None:
    member = AclnnStatus[name]
    assert member == value
    assert AclnnStatus(value) is member
    assert member.name == name  # the canonical name, not an alias


def test_no_status_code_beyond_the_table() -> None:
    # Aliases are not separate members, so the members are exactly the table rows.
    assert {m.name: int(m) for m in AclnnStatus} == STATUS_TABLE


def test_ok_is_an_alias_of_success() -> None:
    assert AclnnStatus.OK is AclnnStatus.ACLNN_SUCCESS
    assert AclnnStatus["OK"] == 0
    assert ACLNN_SUCCESS is AclnnStatus.ACLNN_SUCCESS


def test_misspelt_key_confilict_is_an_alias_of_key_conflict() -> None:
    assert AclnnStatus.ACLNN_ERR_INNER_KEY_CONFILICT is AclnnStatus.ACLNN_ERR_INNER_KEY_CONFLICT
    assert AclnnStatus(561105).name == "ACLNN_ERR_INNER_KEY_CONFLICT"


def test_status_codes_compare_as_plain_ints() -> None:
    # Framework calls return these codes and callers compare them with C-style integers.
    assert AclnnStatus.ACLNN_ERR_PARAM_NULLPTR == 161001
    assert not AclnnStatus.ACLNN_SUCCESS
    assert AclnnStatus.ACLNN_ERR_INNER


def test_unknown_status_value_is_rejected() -> None:
    with pytest.raises(ValueError):
        AclnnStatus(561004)
