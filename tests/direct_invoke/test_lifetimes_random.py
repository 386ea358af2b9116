"""Randomised lifetimes: whatever fails and wherever, every non-null launch state is destroyed exactly once and
every argument context is consumed exactly once (direct-invoke.md §3 "exactly-once guarantee", §7)."""
from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor, TensorList
from opsim.opdev import rt
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.direct_invoke import INT64_MAX, add_direct_invoke_task
from opsim.opdev.executor import destroy_executor, set_repeatable, set_tensor_addr
from opsim.opdev.op_args import OpArgContext, make_op_arg_context, op_attr, op_input, op_output, op_outshape
from opsim.opdev.op_types import OP_TYPE_DICT, register_op_type
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import current, set_current
from opsim.ops import _common as C

S = AclnnStatus
OP = register_op_type("DirectInvokeRandomOp")
API = "aclnnDirectInvokeRandom"
FAULT_POINTS = ("executor.alloc_tensor", "executor.alloc_tensor_list", "direct_invoke.new_launcher")
GOOD_SIZES = (1, 31, 32, 480, 481, 4096, 1 << 20, INT64_MAX)
BAD_SIZES = (0, INT64_MAX + 1, (1 << 64) - 1)
OUTCOMES = (S.ACLNN_SUCCESS, S.ACLNN_ERR_INNER, S.ACLNN_ERR_PARAM_INVALID, S.ACLNN_ERR_RUNTIME_ERROR, 4242)


class State:
    __slots__ = ("sizes", "uid", "destroys")

    def __init__(self, uid: int, sizes):
        self.uid = uid
        self.sizes = sizes
        self.destroys = 0


@dataclass
class Task:
    """One random AddDirectInvokeTask call: what its prepare does and how its launches end."""

    valid_op_type: bool
    null_callback: bool
    bad_args: bool
    prepare_outcome: object  # a status or "raise"
    stateful: bool
    sizes: list | None
    count: int
    launch_outcomes: list
    destroy_raises: bool
    outshape: bool
    states: list = field(default_factory=list)
    prepare_calls: int = 0
    launch_calls: int = 0

    def prepare(self, args, request):
        self.prepare_calls += 1
        state = State(len(self.states), None) if self.stateful else None
        if state is not None:
            self.states.append(state)
            state.sizes = None if self.sizes is None else list(self.sizes)
        request.sizes = state.sizes if state is not None else self.sizes
        request.count = self.count
        if self.prepare_outcome == "raise":
            raise RuntimeError("prepare raised")  # the state built so far is lost, never destroyed
        return self.prepare_outcome, state

    def launch(self, state, args, stream):
        self.launch_calls += 1
        assert state is None or state.destroys == 0, "launch after destroy"
        outcome = self.launch_outcomes[(self.launch_calls - 1) % len(self.launch_outcomes)]
        if outcome == "raise":
            raise RuntimeError("launch raised")
        rt.submit_kernel(current(), stream, "DirectInvokeRandomOp", "AI_VECTOR_CORE", 1, 1.0)
        return outcome

    def destroy(self, state):
        assert state is not None
        state.destroys += 1
        if self.destroy_raises:
            raise RuntimeError("destroy raised")


def random_task(rng: random.Random) -> Task:
    sizes = None
    count = 0
    r = rng.random()
    if r < 0.25:
        count = 0
        sizes = rng.choice([None, [7]])
    elif r < 0.85:
        n = rng.randint(1, 4)
        sizes = [rng.choice(GOOD_SIZES[:-1]) for _ in range(n)]
        if rng.random() < 0.1:
            sizes[rng.randrange(n)] = INT64_MAX
        if rng.random() < 0.2:
            sizes[rng.randrange(n)] = rng.choice(BAD_SIZES)
        count = n if rng.random() < 0.9 else n + 1
    else:
        sizes, count = None, rng.randint(1, 3)
    prepare_outcome = S.ACLNN_SUCCESS if rng.random() < 0.75 else rng.choice(OUTCOMES[1:] + ("raise",))
    launches = [S.ACLNN_SUCCESS if rng.random() < 0.8 else rng.choice(OUTCOMES[1:] + ("raise",))
                for _ in range(rng.randint(1, 3))]
    return Task(valid_op_type=rng.random() < 0.95, null_callback=rng.random() < 0.05, bad_args=rng.random() < 0.05,
                prepare_outcome=prepare_outcome, stateful=rng.random() < 0.8, sizes=sizes, count=count,
                launch_outcomes=launches, destroy_raises=rng.random() < 0.1, outshape=rng.random() < 0.1)


def simulate(seed: int) -> tuple[list[Task], list[OpArgContext]]:
    """One random phase 1 (+ phase 2 runs) on a fresh process; returns the tasks and every context made."""
    rng = random.Random(seed)
    process = ProcessContext()
    ctx = process.new_thread("t0")
    prev = set_current(ctx)
    tasks = [random_task(rng) for _ in range(rng.randint(1, 4))]
    contexts: list[OpArgContext] = []
    fault_point = rng.choice(FAULT_POINTS + (None,) * 3)
    if fault_point is not None:
        nth = rng.randint(1, 3)
        hits = []
        process.faults[fault_point] = lambda *a: hits.append(1) or len(hits) == nth
    x = Tensor([8, 16], DataType.DT_FLOAT, address=0x1000_0000)
    y = Tensor([8, 16], DataType.DT_FLOAT, address=0x1100_0000)
    stop_on_failure = rng.random() < 0.5
    phase1_tail_error = rng.random() < 0.1

    def build(ex):
        for i, task in enumerate(tasks):
            mid = ex.alloc_tensor([8, 16], DataType.DT_FLOAT)
            groups = [op_input(x if i == 0 else mid, None), op_output(y if i == len(tasks) - 1 else mid),
                      op_attr(1e-6)]
            if task.bad_args:
                groups[1] = op_output(TensorList([None]))
            if task.outshape:
                groups.append(op_outshape(ex.alloc_tensor([9], DataType.DT_INT64), 0))
            args = make_op_arg_context(*groups)
            contexts.append(args)
            op_type = OP if task.valid_op_type else rng.choice([0, OP_TYPE_DICT.size()])
            launch = None if task.null_callback else task.launch
            with l0_dfx("DirectInvokeRandomOp", ex):
                status = add_direct_invoke_task(None, op_type, task.prepare, launch, task.destroy, ex, args)
            if status != S.ACLNN_SUCCESS and stop_on_failure:
                return status
        return S.ACLNN_ERR_INNER if phase1_tail_error else S.ACLNN_SUCCESS

    try:
        status, size, ex = C.l2_phase_1(API, (x,), (y,), lambda: S.ACLNN_SUCCESS, build)
        if status == S.ACLNN_SUCCESS:
            plan = rng.choice(["run", "null_workspace", "repeat", "never_run"])
            if plan == "run":
                C.l2_phase_2(API, 0x2000_0000, size, ex, object())
                assert not ex.alive
            elif plan == "null_workspace":
                C.l2_phase_2(API, 0, size or 1, ex, object())
                assert not ex.alive
            elif plan == "repeat":
                if set_repeatable(ex) == S.ACLNN_SUCCESS:
                    for run in range(rng.randint(1, 4)):
                        set_tensor_addr(ex, x, 0x3000_0000 + run * 0x1000)
                        C.l2_phase_2(API, 0x2000_0000 + run * 0x10_0000, size, ex, object())
                        assert ex.alive  # a repeatable executor keeps every state alive between runs
                        assert all(s.destroys == 0 for s in _owned_states(ex))
                    destroy_executor(ex)
                else:
                    C.l2_phase_2(API, 0x2000_0000, size, ex, object())
                assert not ex.alive
            else:
                destroy_executor(ex)  # the application never runs it
    finally:
        set_current(prev)
    return tasks, contexts


def _owned_states(ex) -> list:
    return [l.launch_state for l in ex.kernel_launch_obj_list if l.launch_state is not None]


def check_exactly_once(tasks: list[Task], contexts: list[OpArgContext]) -> None:
    for args in contexts:
        assert args.destroy_count == 1
    for task in tasks:
        for state in task.states:
            if task.prepare_outcome == "raise":
                assert state.destroys == 0  # prepare raised: no state was returned, so none is destroyed
            else:
                assert state.destroys == 1
        assert task.prepare_calls <= 1


@pytest.mark.parametrize("block", range(4))
def test_random_simulations_destroy_exactly_once(block, caplog):
    caplog.set_level(logging.CRITICAL, logger="opsim.opdev")
    outcomes = set()
    for seed in range(block * 400, (block + 1) * 400):
        tasks, contexts = simulate(seed)
        check_exactly_once(tasks, contexts)
        outcomes.update((t.stateful, t.prepare_outcome == S.ACLNN_SUCCESS, t.launch_calls > 0) for t in tasks)
    assert len(outcomes) >= 6  # the seeds cover prepared/failed, stateful/stateless, launched/not launched


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=10_000, max_value=2**32))
def test_property_exactly_once(seed, caplog):
    caplog.set_level(logging.CRITICAL, logger="opsim.opdev")
    tasks, contexts = simulate(seed)
    check_exactly_once(tasks, contexts)
