"""Enumerations from opdev/op_def.h and friends, with opbase's exact values."""
from __future__ import annotations

from enum import IntEnum


class OpImplMode(IntEnum):
    """op::OpImplMode bit flags (tagged OPARG_IMPLMODE in an OpArg)."""

    IMPL_MODE_DEFAULT = 0x1
    IMPL_MODE_HIGH_PERFORMANCE = 0x2
    IMPL_MODE_HIGH_PRECISION = 0x4
    IMPL_MODE_SUPER_PERFORMANCE = 0x8
    IMPL_MODE_SUPPORT_OUT_OF_BOUND_INDEX = 0x10
    IMPL_MODE_ENABLE_FLOAT32_EXECUTION = 0x20
    IMPL_MODE_ENABLE_HI_FLOAT32_EXECUTION = 0x40
    IMPL_MODE_KEEP_FP16 = 0x80
    IMPL_MODE_RESERVED = 0xFFFFFFFF


class OpExecMode(IntEnum):
    """op::OpExecMode (a scoped enum: passed as itself it tags OPARG_INT, not UINT)."""

    OP_EXEC_MODE_DEFAULT = 0
    OP_EXEC_MODE_HF32 = 1
    OP_EXEC_MODE_RESERVED = 0xFFFFFFFF


class CoreType(IntEnum):
    """op::CoreType, the launcher type. DSA launchers use AI_CORE; DIRECT_INVOKE = 4 is assumed."""

    AI_CORE = 0
    AI_CPU = 1
    DVPP = 2
    NO_CALC = 3
    DIRECT_INVOKE = 4


class RepeatMode(IntEnum):
    """OpExecutorImpl::RepeatMode."""

    DEFAULT = 0
    UNREPEATABLE = 1
    REPEAT = 2


class UnknowShapeOpType(IntEnum):
    """ge::UnknowShapeOpType: how an AI CPU op's output shape is known."""

    DEPEND_IN_SHAPE = 1
    DEPEND_CONST_VALUE = 2
    DEPEND_SHAPE_RANGE = 3
    DEPEND_COMPUTE = 4


class DsaTaskType(IntEnum):
    """DSA_TASK_TYPE."""

    DSA_RANDOM_NORMAL = 0
    DSA_RANDOM_TRUNCATED_NORMAL = 1
    DSA_RANDOM_UNIFORM = 2
    DSA_GEN_BIT_MASK = 3


class OpIOType(IntEnum):
    """op::OpIOType."""

    OP_INPUT_TYPE = 0
    OP_OUTPUT_TYPE = 1
    OP_WORKSPACE_TYPE = 2


class MemsetVersion(IntEnum):
    MEMSET_V1 = 0
    MEMSET_V1_ASCENDC = 1
    MEMSET_V2 = 2
