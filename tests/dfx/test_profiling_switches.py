"""The profiling switches and the profiler's control callback (dfx-and-profiling.md §5, op_dfx.cpp
ProfilingCallBack, tests/nnopbase/ut/composite_op/test_profiling.cpp)."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from opsim.opdev import profiling as P
from opsim.opdev.process import ProcessContext
from opsim.opdev.profiling import CommandHandleType as T
from opsim.opdev.profiling import MsprofCommandHandle as H

ALL = (P.PROF_ACL_API_MASK | P.PROF_TASK_TIME_MASK | P.PROF_TASK_TIME_L1_MASK | P.PROF_TASK_TIME_L2_MASK
       | P.PROF_OP_TIMESTAMP_MASK)
FLAGS = ("report_flag", "kernel_launch_flag", "addition_info_flag", "level2_profiling_flag", "time_stamp_flag")


def flags(p):
    return {k: getattr(p.profiling, k) for k in FLAGS}


def test_every_flag_starts_off():
    assert not any(ProcessContext().profiling.as_dict().values())


@pytest.mark.parametrize("bit, flag", [
    (P.PROF_ACL_API_MASK, "report_flag"), (P.PROF_TASK_TIME_MASK, "kernel_launch_flag"),
    (P.PROF_TASK_TIME_L1_MASK, "addition_info_flag"), (P.PROF_TASK_TIME_L2_MASK, "level2_profiling_flag"),
    (P.PROF_OP_ATTR_MASK, "level2_profiling_flag"), (0x100000000, "time_stamp_flag")])
def test_start_sets_exactly_the_flag_of_each_mask_bit(bit, flag):
    """Given a fresh process, when START arrives with one bit, then exactly that bit's flag is on (0)."""
    p = ProcessContext()
    assert P.profiling_callback(p, P.PROF_CTRL_SWITCH, H(T.START, bit)) == 0
    assert {k for k, v in flags(p).items() if v} == {flag}


def test_timestamp_flag_follows_bit_32_only():
    """opbase's UT GetTimeStampFlag: 0x100000000 sets it, STOP clears it, mask 0x1 leaves it off."""
    p = ProcessContext()
    assert P.profiling_callback(p, P.PROF_CTRL_SWITCH, H(T.START, 0x0000100000000)) == 0
    assert p.profiling.time_stamp_flag
    assert P.profiling_callback(p, P.PROF_CTRL_SWITCH, H(T.STOP)) == 0
    assert not p.profiling.time_stamp_flag
    assert P.profiling_callback(p, P.PROF_CTRL_SWITCH, H(T.START, 0x1)) == 0
    assert not p.profiling.time_stamp_flag and p.profiling.report_flag


def test_a_second_start_replaces_the_flags():
    p = ProcessContext()
    P.start_profiling(p, ALL)
    P.start_profiling(p, P.PROF_TASK_TIME_MASK)
    assert {k for k, v in flags(p).items() if v} == {"kernel_launch_flag"}


def test_stop_clears_all_but_record_op_args():
    """Given every flag on and record-op-args set by the dump callback, when STOP arrives, then the five
    profiler flags are off and recordOpArgFlag (not the profiler's) is untouched."""
    p = ProcessContext()
    P.start_profiling(p, ALL)
    P.record_op_arg_callback(p, True)
    assert all(flags(p).values())
    assert P.stop_profiling(p) == 0
    assert not any(flags(p).values()) and p.profiling.record_op_arg_flag and p.record_op_args


@pytest.mark.parametrize("kind", [T.INIT, T.FINALIZE, 7])
def test_other_command_types_are_discarded(kind):
    """UT kernel_launch_profiling: an INIT after STOP returns 0 and changes nothing."""
    p = ProcessContext()
    P.start_profiling(p, P.PROF_TASK_TIME_MASK)
    before = flags(p)
    assert P.profiling_callback(p, P.PROF_CTRL_SWITCH, H(kind, ALL)) == 0
    assert flags(p) == before


def test_payload_checks():
    """Null data or a wrong length -> -1 (before the control type is looked at); another control type -> 0,
    ignored."""
    p = ProcessContext()
    assert P.profiling_callback(p, P.PROF_CTRL_INVALID, None, 0) == -1
    assert P.profiling_callback(p, P.PROF_CTRL_SWITCH, H(T.START, ALL), 0) == -1
    assert P.profiling_callback(p, P.PROF_CTRL_INVALID, H(T.START, ALL)) == 0
    assert not any(flags(p).values())


def test_failed_type_registration_returns_minus_one_with_flags_already_set():
    p = ProcessContext()
    p.faults["profiling.reg_type_info"] = lambda what: what == "node_attr_info"
    assert P.start_profiling(p, P.PROF_TASK_TIME_MASK | P.PROF_TASK_TIME_L2_MASK) == -1
    assert p.profiling.level2_profiling_flag and p.profiling.kernel_launch_flag
    # basic info is registered only with addition info and one of report / kernel launch / timestamp
    p.faults["profiling.reg_type_info"] = lambda what: what == "node_basic_info"
    assert P.start_profiling(p, P.PROF_TASK_TIME_L1_MASK) == 0
    assert P.start_profiling(p, P.PROF_TASK_TIME_L1_MASK | P.PROF_TASK_TIME_MASK) == -1


def test_level2_and_record_op_args_disable_the_exec_cache():
    from opsim.opdev.op_exec_cache import check_cacheable
    p = ProcessContext()
    ctx = p.new_thread()
    assert check_cacheable(ctx)
    P.start_profiling(p, P.PROF_OP_ATTR_MASK)
    assert not check_cacheable(ctx)
    P.stop_profiling(p)
    assert check_cacheable(ctx)
    P.record_op_arg_callback(p, True)
    assert not check_cacheable(ctx)


def test_constructor_mask_is_a_start_command():
    p = ProcessContext(profiling_switch=P.PROF_TASK_TIME_MASK | P.PROF_TASK_TIME_L1_MASK)
    assert p.profiling.kernel_launch_flag and p.profiling.addition_info_flag
    assert p.profiling_commands == [("start", P.PROF_TASK_TIME_MASK | P.PROF_TASK_TIME_L1_MASK)]


def test_mask_names():
    assert P.mask_of(["task_time", "task_time_l1"]) == 0x802
    assert P.mask_of(5) == 5
    with pytest.raises(KeyError):
        P.mask_of(["task_tme"])


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_start_flags_are_a_function_of_the_mask_and_stop_always_clears(mask):
    p = ProcessContext()
    assert P.start_profiling(p, mask) == 0
    f = flags(p)
    assert f["report_flag"] == bool(mask & 0x1)
    assert f["kernel_launch_flag"] == bool(mask & 0x800)
    assert f["addition_info_flag"] == bool(mask & 0x2)
    assert f["level2_profiling_flag"] == bool(mask & 0x6000)
    assert f["time_stamp_flag"] == bool(mask & 0x100000000)
    P.stop_profiling(p)
    assert not any(flags(p).values())
