"""opbase's profiling switches and the profiler's control callback (opbase `composite_op/aclnn_engine/op_dfx.cpp`).

The switches are process-wide flags that the profiler sets through the callback opbase registers with it
(`ProfilingCallBack`): a START command sets every flag from the switch mask, a STOP command clears them all,
any other command (INIT, FINALIZE) is discarded. Which reports a launch emits is decided by these flags at the
moment it runs (`opsim.opdev.dfx`), so a program can start and stop profiling around any of its calls.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any

log = logging.getLogger("opsim.opdev")

# Control types of the profiler callback (msprof's ProfCtrlType: PROF_CTRL_INVALID 0, PROF_CTRL_SWITCH 1).
PROF_CTRL_INVALID = 0
PROF_CTRL_SWITCH = 1


class CommandHandleType(IntEnum):
    """MsprofCommandHandle.type (msprof headers: PROF_COMMANDHANDLE_TYPE_INIT 0 .. FINALIZE 3)."""

    INIT = 0
    START = 1
    STOP = 2
    FINALIZE = 3


# Switch-mask bits opbase reads (msprof's DataTypeConfig masks).
PROF_ACL_API_MASK = 0x00000001
PROF_TASK_TIME_L1_MASK = 0x00000002
PROF_TASK_TIME_MASK = 0x00000800
PROF_TASK_TIME_L2_MASK = 0x00002000
PROF_OP_ATTR_MASK = 0x00004000
PROF_OP_TIMESTAMP_MASK = 0x0000100000000

MASK_NAMES: dict[str, int] = {
    "acl_api": PROF_ACL_API_MASK,
    "task_time": PROF_TASK_TIME_MASK,
    "task_time_l1": PROF_TASK_TIME_L1_MASK,
    "task_time_l2": PROF_TASK_TIME_L2_MASK,
    "op_attr": PROF_OP_ATTR_MASK,
    "op_timestamp": PROF_OP_TIMESTAMP_MASK,
}
"""The mask bits by the names a scenario uses for them."""

COMMAND_HANDLE_SIZE = 280
"""Stands in for sizeof(MsprofCommandHandle): the callback refuses any other payload length. The value is
the simulator's own (the C struct layout is abstracted); only "equal or not" matters."""


@dataclass
class OpProfilingSwitch:
    """The process-wide flags (`op::internal::opProfilingSwitch`)."""

    report_flag: bool = False
    kernel_launch_flag: bool = False
    addition_info_flag: bool = False
    record_op_arg_flag: bool = False
    level2_profiling_flag: bool = False
    time_stamp_flag: bool = False

    def as_dict(self) -> dict[str, bool]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class MsprofCommandHandle:
    """The callback payload: command type and switch mask (device list and model id are not used by opbase)."""

    type: int
    prof_switch: int = 0


def mask_of(names: Any) -> int:
    """A switch mask from an int or a list of MASK_NAMES keys (unknown names raise KeyError)."""
    if isinstance(names, int):
        return names
    mask = 0
    for n in names:
        mask |= MASK_NAMES[n]
    return mask


def profiling_callback(process: Any, ctrl_type: int, handle: MsprofCommandHandle | None,
                       length: int = COMMAND_HANDLE_SIZE) -> int:
    """ProfilingCallBack(type, data, len): 0 on success or discard, -1 on a bad payload or a failed
    type registration (the flags are already set when that happens)."""
    if handle is None:
        log.warning("profiling callback: data is null")
        return -1
    if length != COMMAND_HANDLE_SIZE:
        log.warning("profiling callback: len %d != sizeof MsprofCommandHandle", length)
        return -1
    if ctrl_type != PROF_CTRL_SWITCH:
        return 0
    if handle.type not in (CommandHandleType.START, CommandHandleType.STOP):
        return 0
    sw = process.profiling
    if handle.type == CommandHandleType.STOP:
        sw.report_flag = sw.kernel_launch_flag = sw.addition_info_flag = False
        sw.level2_profiling_flag = sw.time_stamp_flag = False
        _mark(process, "stop", 0)
        return 0
    m = handle.prof_switch
    sw.report_flag = bool(m & PROF_ACL_API_MASK)
    sw.kernel_launch_flag = bool(m & PROF_TASK_TIME_MASK)
    sw.addition_info_flag = bool(m & PROF_TASK_TIME_L1_MASK)
    sw.level2_profiling_flag = bool(m & (PROF_TASK_TIME_L2_MASK | PROF_OP_ATTR_MASK))
    sw.time_stamp_flag = bool(m & PROF_OP_TIMESTAMP_MASK)
    _mark(process, "start", m)
    if (sw.report_flag or sw.kernel_launch_flag or sw.time_stamp_flag) and sw.addition_info_flag:
        if process.fault("profiling.reg_type_info", "node_basic_info"):
            return -1
    if sw.level2_profiling_flag and process.fault("profiling.reg_type_info", "node_attr_info"):
        return -1
    return 0


def _mark(process: Any, what: str, mask: int) -> None:
    """Keep the switch history on the process (the trace instant is stamped by the caller's thread)."""
    process.profiling_commands.append((what, mask))


def start_profiling(process: Any, mask: int) -> int:
    """What the profiler does when profiling starts for a registered module: INIT, then START with the mask."""
    profiling_callback(process, PROF_CTRL_SWITCH, MsprofCommandHandle(CommandHandleType.INIT, mask))
    return profiling_callback(process, PROF_CTRL_SWITCH, MsprofCommandHandle(CommandHandleType.START, mask))


def stop_profiling(process: Any) -> int:
    """The profiler's STOP command: every flag except record-op-args is cleared."""
    return profiling_callback(process, PROF_CTRL_SWITCH, MsprofCommandHandle(CommandHandleType.STOP))


def record_op_arg_callback(process: Any, enabled: bool) -> None:
    """The dump subsystem's op-arg callback: sets recordOpArgFlag (untouched by profiler STOP)."""
    process.profiling.record_op_arg_flag = bool(enabled)


__all__ = ["OpProfilingSwitch", "MsprofCommandHandle", "CommandHandleType", "profiling_callback",
           "start_profiling", "stop_profiling", "record_op_arg_callback", "mask_of", "MASK_NAMES",
           "PROF_CTRL_SWITCH", "PROF_CTRL_INVALID", "PROF_ACL_API_MASK", "PROF_TASK_TIME_MASK",
           "PROF_TASK_TIME_L1_MASK", "PROF_TASK_TIME_L2_MASK", "PROF_OP_ATTR_MASK", "PROF_OP_TIMESTAMP_MASK",
           "COMMAND_HANDLE_SIZE"]
