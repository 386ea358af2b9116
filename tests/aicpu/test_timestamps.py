"""GE_PROFILING_TO_STD_OUT: the exact printed block, the timespec duration arithmetic, the switch, the process-wide
index, and stamping/printing in simulated-time order across threads (aicpu-tasks.md §12)."""
from __future__ import annotations

import numpy as np
import pytest

from opsim.acl import Tensor
from opsim.acl.status import AclnnStatus
from opsim.opdev.aicpu import timestamps as ts
from opsim.opdev.aicpu.kernel_lib import CC, AicpuKernel, register_aicpu_kernel
from opsim.opdev.aicpu.launcher import add_to_launcher_list_aicpu
from opsim.opdev.aicpu.task_space import get_task_space
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.op_args import op_attr, op_input, op_output
from opsim.opdev.op_def import UnknowShapeOpType
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import A_CALL, A_SPAN, current, set_current
from opsim.ops import _common as C
from opsim.runtime.simulation import Simulation

S = AclnnStatus
OP_A = "AicpuTsOpA"
OP_B = "AicpuTsOpB"
OP_RANGE = "AicpuTsRangeOp"
register_aicpu_kernel(AicpuKernel(OP_A, CC))
register_aicpu_kernel(AicpuKernel(OP_B, CC))
register_aicpu_kernel(AicpuKernel(OP_RANGE, CC, output_shapes=lambda ins, outs, attrs: [(2,)]))


def prepare(op, unknown=UnknowShapeOpType.DEPEND_IN_SHAPE):
    x, y = Tensor([4]), Tensor([4])

    def build(ex):
        with l0_dfx(op, ex):
            return add_to_launcher_list_aicpu(op, get_task_space(op, unknown), ex, ("n",), op_input(x),
                                              op_output(y), op_attr(np.int64(1)))

    return C.l2_phase_1("aclnn" + op, (x,), (y,), lambda: S.ACLNN_SUCCESS, build)


def call_op(op, stream=None, unknown=UnknowShapeOpType.DEPEND_IN_SHAPE):
    status, size, ex = prepare(op, unknown)
    assert status == S.ACLNN_SUCCESS
    return C.l2_phase_2("aclnn" + op, 0x1000 if size else 0, size, ex, stream)


def replay(ctx, t0: float = 0.0) -> float:
    """The host replay without SimPy: spans advance the thread clock, callbacks get their time."""
    t = t0
    for a in ctx.take_actions():
        if a[0] == A_SPAN:
            t += a[3]
        elif a[0] == A_CALL:
            a[1](t)
    return t


# ---- exact format ---------------------------------------------------------------------------------------

def test_line_format_is_exact():
    line = ts.format_line("FindTask", 15)
    assert line == "FindTask           : 0.015000 \n"
    assert line.index(":") == 19 and line[8:19] == " " * 11 and line.endswith(" \n")
    assert ts.format_line("UpdateOutputShape", 1_234_567) == "UpdateOutputShape  : 1234.567000 \n"


def test_labels_and_indices():
    assert [(label, a, b) for label, a, b in ts.PRINT_LINES] == [
        ("FindTask          ", 0, 1), ("UpdateShape       ", 2, 3), ("ShapeH2D          ", 3, 4),
        ("UpdateArgs        ", 5, 6), ("Launch            ", 6, 7), ("CopyShapeD2H      ", 7, 8),
        ("UpdateOutputShape ", 8, 9)]
    assert all(len(label) == 18 for label, _, _ in ts.PRINT_LINES)
    assert ts.K_AICPU_TIMESTAMP_NUM == 10


def test_block_format():
    stamps = [0.0, 0.5, 1.0, 2.0, 2.0, 2.0, 3.5, 7.5, 7.5, 7.5]
    assert "".join(ts.format_block("Pad", 3, stamps)) == (
        "test case opType: Pad, index: 3\n"
        "FindTask           : 0.500000 \n"
        "UpdateShape        : 1.000000 \n"
        "ShapeH2D           : 0.000000 \n"
        "UpdateArgs         : 1.500000 \n"
        "Launch             : 4.000000 \n"
        "CopyShapeD2H       : 0.000000 \n"
        "UpdateOutputShape  : 0.000000 \n"
        "\n")


def test_timespec_duration_arithmetic():
    assert ts.to_timespec(1_500_000.25) == (1, 500_000_250)
    assert ts.duration_ns(1.0, 3.5) == 2500
    assert ts.duration_ns(999_999.9, 1_000_000.2) == 300                 # across a second boundary
    assert ts.duration_ns(0.5, 2_500_000.5) == 1_500_000_000             # only one second is ever added
    wrapped = ts.duration_ns(5.0, 2.0)                                   # a stale pair wraps (unsigned)
    assert wrapped == (1 << 64) - 3000
    assert ts.format_line("Launch", wrapped) == "Launch             : 18446744073709548.000000 \n"


# ---- end to end without SimPy ---------------------------------------------------------------------------

@pytest.fixture
def printing():
    lines: list[str] = []
    p = ProcessContext(env={"GE_PROFILING_TO_STD_OUT": "1"}, stdout=lines.append)
    prev = set_current(p.new_thread())
    yield p, lines
    set_current(prev)


def test_printed_block_of_one_call(printing):
    p, lines = printing
    assert call_op(OP_A) == S.ACLNN_SUCCESS
    replay(current(), 100.0)
    assert lines == [
        f"test case opType: {OP_A}, index: 0\n",
        "FindTask           : 0.500000 \n",
        "UpdateShape        : 1.000000 \n",
        "ShapeH2D           : 0.000000 \n",
        "UpdateArgs         : 1.500000 \n",
        "Launch             : 4.000000 \n",
        "CopyShapeD2H       : 0.000000 \n",
        "UpdateOutputShape  : 0.000000 \n",
        "\n",
    ]


def test_index_is_process_wide(printing):
    p, lines = printing
    call_op(OP_A)
    set_current(p.new_thread())
    call_op(OP_B)
    call_op(OP_A)
    for ctx in p.threads:
        replay(ctx)
    headers = [line for line in lines if line.startswith("test case")]
    assert headers == [f"test case opType: {OP_A}, index: 0\n", f"test case opType: {OP_B}, index: 1\n",
                       f"test case opType: {OP_A}, index: 2\n"]
    assert p.aicpu_print_index == 3


@pytest.mark.parametrize("value,enabled", [("1", True), ("10", True), ("1x", True), ("0", False), (" 1", False),
                                           ("", False), (None, False)])
def test_switch_values(value, enabled):
    lines: list[str] = []
    env = {} if value is None else {"GE_PROFILING_TO_STD_OUT": value}
    p = ProcessContext(env=env, stdout=lines.append)
    set_current(p.new_thread())
    call_op(OP_A)
    replay(current())
    assert bool(lines) is enabled and p.aicpu_timestamp_enabled is enabled


def test_switch_is_re_read_at_every_lookup(printing):
    p, lines = printing
    call_op(OP_A)
    p.env["GE_PROFILING_TO_STD_OUT"] = "0"
    call_op(OP_A)
    replay(current())
    assert sum(line.startswith("test case") for line in lines) == 1


def test_stamps_are_taken_only_while_enabled():
    p = ProcessContext()
    set_current(p.new_thread())
    call_op(OP_A)
    replay(current(), 50.0)
    assert p.aicpu_timestamps == [0.0] * 10


# ---- SimPy: simulated-time order ------------------------------------------------------------------------

def busy_then(fn, us):
    """Host work of `us` microseconds before `fn` runs (e.g. the rest of a composite phase 1)."""
    def call(*args):
        current().charge("app work", "app", us=us)
        return fn(*args)
    return call


def test_find_task_stamp_is_the_most_recent_lookup_in_simulated_time():
    lines: list[str] = []
    sim = Simulation(env={"GE_PROFILING_TO_STD_OUT": "1"}, stdout=lines.append, trace=False)

    def thread_a(th):
        # issued first, but its lookup happens 500 us into the call
        yield from th.call(busy_then(prepare, 500.0), OP_A)

    def thread_b(th):
        yield th.env.timeout(100.0)
        yield from th.call(prepare, OP_B)

    sim.add_thread(thread_a, "a")
    sim.add_thread(thread_b, "b")
    sim.run()
    stamps = sim.process.aicpu_timestamps
    assert 500.0 < stamps[0] < 510.0 and stamps[1] - stamps[0] == pytest.approx(0.5)


def test_blocks_print_in_simulated_time_order():
    lines: list[str] = []
    sim = Simulation(env={"GE_PROFILING_TO_STD_OUT": "1"}, stdout=lines.append, trace=False)

    def one_call(op, delay):
        status, size, ex = prepare(op)
        current().charge("app work", "app", us=delay)
        return C.l2_phase_2("aclnn" + op, 0, size, ex, None)

    def thread_a(th):
        yield from th.call(one_call, OP_A, 600.0)     # issued at t=0, prints after 600 us of other work

    def thread_b(th):
        yield th.env.timeout(100.0)
        yield from th.call(one_call, OP_B, 0.0)       # issued later, prints earlier

    sim.add_thread(thread_a, "a")
    sim.add_thread(thread_b, "b")
    sim.run()
    headers = [line for line in lines if line.startswith("test case")]
    assert headers == [f"test case opType: {OP_B}, index: 0\n", f"test case opType: {OP_A}, index: 1\n"]


def test_shape_range_block_in_a_simulation():
    lines: list[str] = []
    sim = Simulation(env={"GE_PROFILING_TO_STD_OUT": "1"}, stdout=lines.append, trace=False)

    def program(th):
        stream = sim.device.create_stream()
        assert (yield from th.call(call_op, OP_RANGE, stream, UnknowShapeOpType.DEPEND_SHAPE_RANGE)) == 0

    sim.add_thread(program, "t")
    sim.run()
    values = {line[:18].strip(): float(line.split(":")[1]) for line in lines[1:8]}
    assert values["ShapeH2D"] == 3.0 and values["UpdateOutputShape"] == 1.0
    assert values["CopyShapeD2H"] > 5.0 + 20.0       # waits for the kernel (AI CPU launch latency) then copies
    assert lines[-1] == "\n"
